package codec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
)

// chunkReader returns at most n bytes per Read.
type chunkReader struct {
	r io.Reader
	n int
}

func (c chunkReader) Read(p []byte) (int, error) {
	if len(p) > c.n {
		p = p[:c.n]
	}
	return c.r.Read(p)
}

// parseAll reads commands until an error; it returns them as strings and
// the final error (nil for a clean EOF). With pipelined, it reads as the
// server does: after each ReadCommand, what is already buffered with
// TryReadCommand, then Release.
func parseAll(rd io.Reader, lim Limits, pipelined bool) ([][]string, error) {
	r := NewReader(rd, lim)
	var out [][]string
	for {
		args, err := r.ReadCommand()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, strs(args))
		for pipelined {
			args, ok, err := r.TryReadCommand()
			if err != nil {
				return out, err
			}
			if !ok {
				break
			}
			out = append(out, strs(args))
		}
		r.Release()
	}
}

func strs(args [][]byte) []string {
	s := make([]string, len(args))
	for i, a := range args {
		s[i] = string(a)
	}
	return s
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

var small = Limits{MaxArgs: 4, MaxFrameSize: 64, MaxInlineLen: 32, MaxBulkLen: 40}

func TestParse(t *testing.T) {
	long := strings.Repeat("x", 100)
	tests := []struct {
		name  string
		in    string
		lim   Limits
		want  [][]string
		error string
	}{
		{name: "multibulk", in: "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", want: [][]string{{"GET", "k"}}},
		{name: "binary bulk", in: "*2\r\n$4\r\nECHO\r\n$6\r\na\r\nb\x00c\r\n", want: [][]string{{"ECHO", "a\r\nb\x00c"}}},
		{name: "empty bulk", in: "*2\r\n$3\r\nSET\r\n$0\r\n\r\n", want: [][]string{{"SET", ""}}},
		{name: "pipeline", in: "*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\nPING\r\n", want: [][]string{{"PING"}, {"PING"}, {"PING"}}},
		{name: "empty multibulk skipped", in: "*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n", want: [][]string{{"PING"}}},
		{name: "inline", in: "GET k\r\n", want: [][]string{{"GET", "k"}}},
		{name: "inline lf", in: "GET k\nSET a b\n", want: [][]string{{"GET", "k"}, {"SET", "a", "b"}}},
		{name: "inline blanks", in: " \t SET   a\t b  \r\n", want: [][]string{{"SET", "a", "b"}}},
		{name: "inline empty lines skipped", in: "\r\n\n   \r\nPING\r\n", want: [][]string{{"PING"}}},
		{name: "inline double quotes", in: `SET k "a b\n\r\t\b\a\x41\x4a\"\\\q"` + "\r\n", want: [][]string{{"SET", "k", "a b\n\r\t\b\aAJ\"\\q"}}},
		{name: "inline single quotes", in: `SET k 'it\'s "x" \n'` + "\r\n", want: [][]string{{"SET", "k", `it's "x" \n`}}},
		{name: "inline empty quoted", in: `SET "" ''` + "\r\n", want: [][]string{{"SET", "", ""}}},
		{name: "inline quote inside token", in: `SET a"b c"d` + "\r\n", error: "ERR Protocol error: unbalanced quotes in request"},
		{name: "inline token then quote", in: `SET a"b c" d` + "\r\n", want: [][]string{{"SET", "ab c", "d"}}},
		{name: "inline bad hex kept", in: `ECHO "\xZZ"` + "\r\n", want: [][]string{{"ECHO", "xZZ"}}},
		{name: "unbalanced double", in: "SET k \"abc\r\n", error: "ERR Protocol error: unbalanced quotes in request"},
		{name: "unbalanced single", in: "SET k 'abc\r\n", error: "ERR Protocol error: unbalanced quotes in request"},
		{name: "closing quote not followed by space", in: "SET k \"a\"b\r\n", error: "ERR Protocol error: unbalanced quotes in request"},
		{name: "trailing backslash in quotes", in: "SET k \"a\\\r\n", error: "ERR Protocol error: unbalanced quotes in request"},
		{name: "invalid multibulk length", in: "*abc\r\n", error: "ERR Protocol error: invalid multibulk length"},
		{name: "multibulk plus sign", in: "*+1\r\n", error: "ERR Protocol error: invalid multibulk length"},
		{name: "multibulk leading zero", in: "*01\r\n", error: "ERR Protocol error: invalid multibulk length"},
		{name: "multibulk empty count", in: "*\r\n", error: "ERR Protocol error: invalid multibulk length"},
		{name: "multibulk without CR", in: "*1\n$4\r\nPING\r\n", error: "ERR Protocol error: invalid multibulk length"},
		{name: "multibulk huge", in: "*99999999999\r\n", error: "ERR Protocol error: invalid multibulk length"},
		{name: "multibulk overflow", in: "*99999999999999999999\r\n", error: "ERR Protocol error: invalid multibulk length"},
		{name: "too many args", in: "*2000000\r\n", error: "ERR Protocol error: too many arguments (2000000, limit 1048576)"},
		{name: "too many args small", in: "*5\r\n", lim: small, error: "ERR Protocol error: too many arguments (5, limit 4)"},
		{name: "too many inline args", in: "a b c d e\r\n", lim: small, error: "ERR Protocol error: too many arguments (5, limit 4)"},
		{name: "expected dollar", in: "*1\r\n:5\r\n", error: "ERR Protocol error: expected '$', got ':'"},
		{name: "expected dollar empty line", in: "*1\r\n\r\n", error: "ERR Protocol error: expected '$', got '\r'"},
		{name: "invalid bulk length", in: "*1\r\n$abc\r\n", error: "ERR Protocol error: invalid bulk length"},
		{name: "negative bulk length", in: "*1\r\n$-1\r\n", error: "ERR Protocol error: invalid bulk length"},
		{name: "bulk over max", in: "*1\r\n$41\r\n", lim: small, error: "ERR Protocol error: invalid bulk length"},
		{name: "bulk gigabyte", in: "*1\r\n$1000000000\r\n", error: "ERR Protocol error: command frame too large (1000000019 bytes, limit 134217728)"},
		{name: "bulk huge", in: "*1\r\n$9223372036854775807\r\n", error: "ERR Protocol error: command frame too large (9223372036854775807 bytes, limit 134217728)"},
		{name: "frame too large", in: "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$40\r\n", lim: small, error: "ERR Protocol error: command frame too large (67 bytes, limit 64)"},
		{name: "frame exactly at limit", in: "*2\r\n$3\r\nSET\r\n$40\r\n" + long[:40] + "\r\n", lim: small, want: [][]string{{"SET", long[:40]}}},
		{name: "frame too large default", in: "*2\r\n$3\r\nSET\r\n$134217728\r\n", error: "ERR Protocol error: command frame too large (134217755 bytes, limit 134217728)"},
		{name: "inline too big", in: "SET k " + long + "\r\n", lim: small, error: "ERR Protocol error: too big inline request"},
		{name: "inline too big no newline", in: "SET k " + long, lim: small, error: "ERR Protocol error: too big inline request"},
		{name: "inline at limit", in: "SET k " + long[:26] + "\r\n", lim: small, want: [][]string{{"SET", "k", long[:26]}}},
		{name: "mbulk count too big", in: "*" + long, lim: small, error: "ERR Protocol error: too big mbulk count string"},
		{name: "bulk count too big", in: "*1\r\n$" + long, lim: small, error: "ERR Protocol error: too big bulk count string"},
		{name: "bad bulk terminator", in: "*1\r\n$3\r\nabcXY", error: "ERR Protocol error: expected CRLF after bulk argument"},
		{name: "truncated bulk", in: "*1\r\n$3\r\nab", error: io.ErrUnexpectedEOF.Error()},
		{name: "truncated header", in: "*2\r\n$3\r\nGET\r\n", error: io.ErrUnexpectedEOF.Error()},
		{name: "truncated inline", in: "PING", error: io.ErrUnexpectedEOF.Error()},
		{name: "commands before error", in: "PING\r\n*1\r\n$x\r\n", want: [][]string{{"PING"}}, error: "ERR Protocol error: invalid bulk length"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			readers := map[string]func() io.Reader{
				"whole":   func() io.Reader { return strings.NewReader(tc.in) },
				"onebyte": func() io.Reader { return iotest.OneByteReader(strings.NewReader(tc.in)) },
				"chunk3":  func() io.Reader { return chunkReader{strings.NewReader(tc.in), 3} },
				"chunk7":  func() io.Reader { return chunkReader{strings.NewReader(tc.in), 7} },
			}
			for rname, mk := range readers {
				got, err := parseAll(mk(), tc.lim, false)
				if fmt.Sprint(got) != fmt.Sprint(tc.want) || errText(err) != tc.error {
					t.Errorf("%s: got %q, %q; want %q, %q", rname, got, errText(err), tc.want, tc.error)
				}
			}
			// Pipelined: the first ReadCommand buffers the whole input,
			// TryReadCommand parses the rest.
			got, err := parseAll(bytes.NewReader([]byte(tc.in)), tc.lim, true)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || errText(err) != tc.error {
				t.Errorf("buffered: got %q, %q; want %q, %q", got, errText(err), tc.want, tc.error)
			}
			if err != nil && strings.HasPrefix(tc.error, "ERR") {
				var pe *ProtocolError
				if !errors.As(err, &pe) {
					t.Errorf("error %T is not a *ProtocolError", err)
				}
			}
		})
	}
}

// A large bulk read in small pieces arrives intact, and commands returned
// before Release stay valid while later ones are parsed.
func TestParseLargeBulkAndArgLifetime(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 100000) // 1.6 MB
	var in []byte
	in = AppendCommand(in, []byte("SET"), []byte("k1"), big)
	in = AppendCommand(in, []byte("SET"), []byte("k2"), []byte("v2"))
	in = AppendCommand(in, []byte("GET"), big[:5000])
	for _, rd := range []io.Reader{bytes.NewReader(in), chunkReader{bytes.NewReader(in), 1000}, chunkReader{bytes.NewReader(in), 70000}} {
		r := NewReader(rd, Limits{})
		var held [][][]byte
		for range 3 {
			args, err := r.ReadCommand()
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, args)
		}
		if _, err := r.ReadCommand(); err != io.EOF {
			t.Fatalf("want EOF, got %v", err)
		}
		if !bytes.Equal(held[0][2], big) || string(held[0][1]) != "k1" {
			t.Fatal("first command corrupted")
		}
		if string(held[1][2]) != "v2" || !bytes.Equal(held[2][1], big[:5000]) {
			t.Fatal("later commands corrupted")
		}
		r.Release()
	}
}

// A header announcing a huge bulk must not make the reader allocate it:
// memory follows the bytes actually received.
func TestParseNoUpfrontAllocation(t *testing.T) {
	lim := Limits{MaxFrameSize: 1 << 30, MaxBulkLen: 1 << 30}
	in := []byte("*2\r\n$3\r\nSET\r\n$1000000000\r\n" + strings.Repeat("x", 100000))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := NewReader(chunkReader{bytes.NewReader(in), 8192}, lim)
	_, err := r.ReadCommand()
	runtime.ReadMemStats(&after)
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("got %v, want unexpected EOF", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 4<<20 {
		t.Fatalf("allocated %d bytes for 100 KB of input", n)
	}
}

func TestTryReadCommandPartial(t *testing.T) {
	pr, pw := io.Pipe()
	r := NewReader(pr, Limits{})
	go func() { _, _ = pw.Write([]byte("PING\r\n*2\r\n$3\r\nGET\r\n$1\r\n")) }()
	args, err := r.ReadCommand()
	if err != nil || string(args[0]) != "PING" {
		t.Fatalf("got %q, %v", args, err)
	}
	if r.Buffered() == 0 {
		t.Fatal("expected buffered bytes")
	}
	if _, ok, err := r.TryReadCommand(); ok || err != nil {
		t.Fatalf("partial command: ok=%v err=%v", ok, err)
	}
	go func() { _, _ = pw.Write([]byte("k\r\n")) }()
	args, err = r.ReadCommand()
	if err != nil || fmt.Sprint(strs(args)) != "[GET k]" {
		t.Fatalf("got %q, %v", args, err)
	}
	if r.Buffered() != 0 {
		t.Fatal("nothing should be buffered")
	}
	if _, ok, err := r.TryReadCommand(); ok || err != nil {
		t.Fatal("empty buffer must not yield a command")
	}
}

// Golden values from C's printf("%.17g").
func TestAppendDouble(t *testing.T) {
	tests := []struct {
		f    float64
		want string
	}{
		{1.5, "1.5"}, {1.1, "1.1000000000000001"}, {0.1, "0.10000000000000001"}, {3, "3"},
		{-2.5, "-2.5"}, {1e6, "1000000"}, {1e16, "10000000000000000"}, {1e17, "1e+17"},
		{1.2345678901234567e17, "1.2345678901234566e+17"}, {123456789012345678.0, "1.2345678901234568e+17"}, {1e-4, "0.0001"},
		{1e-5, "1.0000000000000001e-05"}, {0.00012345, "0.00012344999999999999"},
		{-1.7976931348623157e308, "-1.7976931348623157e+308"}, {5e-324, "4.9406564584124654e-324"},
		{2.5e-300, "2.5e-300"}, {100, "100"}, {3.14159265358979, "3.14159265358979"},
		{1.0 / 3, "0.33333333333333331"}, {12345678901234567890.0, "1.2345678901234567e+19"},
		{99999999999999999.0, "1e+17"}, {0.3, "0.29999999999999999"},
		{0, "0"}, {math.Copysign(0, -1), "-0"},
	}
	for _, tc := range tests {
		if got := string(AppendDouble(nil, tc.f)); got != tc.want {
			t.Errorf("%v: got %q want %q", tc.f, got, tc.want)
		}
	}
}

func TestAppendCommandRoundTrip(t *testing.T) {
	args := [][]byte{[]byte("SET"), []byte("k\r\n"), {}, bytes.Repeat([]byte{0xff}, 5000)}
	in := AppendCommand(nil, args...)
	got, err := parseAll(bytes.NewReader(in), Limits{}, false)
	if err != nil || len(got) != 1 || fmt.Sprint(got[0]) != fmt.Sprint(strs(args)) {
		t.Fatalf("got %q, %v", got, err)
	}
}

func BenchmarkParse(b *testing.B) {
	var in []byte
	const n = 128
	for i := range n {
		in = AppendCommand(in, []byte("SET"), fmt.Appendf(nil, "key:%d", i), bytes.Repeat([]byte("v"), 64))
	}
	br := bytes.NewReader(in)
	r := NewReader(br, Limits{})
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		br.Reset(in)
		r.Reset(br)
		for {
			_, err := r.ReadCommand()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if r.Pending() > 32<<10 {
				r.Release()
			}
		}
		r.Release()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/cmd")
}

func BenchmarkParseInline(b *testing.B) {
	in := bytes.Repeat([]byte("SET key:1 \"some value\"\r\n"), 128)
	br := bytes.NewReader(in)
	r := NewReader(br, Limits{})
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for range b.N {
		br.Reset(in)
		r.Reset(br)
		for {
			if _, err := r.ReadCommand(); err != nil {
				break
			}
		}
		r.Release()
	}
}
