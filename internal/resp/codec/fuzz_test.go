package codec

import (
	"bytes"
	"fmt"
	"io"
	"testing"
)

var fuzzLimits = Limits{MaxArgs: 16, MaxBulkLen: 512, MaxFrameSize: 1024, MaxInlineLen: 256}

type fuzzResult struct {
	cmds [][]string
	err  string
}

// fuzzParse parses data through a reader delivering chunk bytes per read,
// checking the limits and the reader's memory on every command.
func fuzzParse(t *testing.T, data []byte, chunk int, buffered bool) fuzzResult {
	lim := fuzzLimits.WithDefaults()
	var rd io.Reader = bytes.NewReader(data)
	if chunk > 0 {
		rd = chunkReader{rd, chunk}
	}
	r := NewReader(rd, fuzzLimits)
	var res fuzzResult
	check := func(args [][]byte) {
		if len(args) == 0 || len(args) > lim.MaxArgs {
			t.Fatalf("command with %d args (limit %d)", len(args), lim.MaxArgs)
		}
		total := 0
		for _, a := range args {
			if len(a) > lim.MaxBulkLen {
				t.Fatalf("argument of %d bytes (limit %d)", len(a), lim.MaxBulkLen)
			}
			total += len(a)
		}
		if total > lim.MaxFrameSize {
			t.Fatalf("command of %d bytes (limit %d)", total, lim.MaxFrameSize)
		}
		// Memory held by the reader follows the limits, never the input
		// size: one line buffer and at most one pipeline's arguments.
		if c := cap(r.buf); c > 2*(lim.MaxInlineLen+2)+initialBufSize {
			t.Fatalf("read buffer grew to %d", c)
		}
		if c := cap(r.arena); c > 4*lim.MaxFrameSize+64<<10 && c > 2*len(data) {
			t.Fatalf("arena grew to %d for %d bytes of input", c, len(data))
		}
		res.cmds = append(res.cmds, strs(args))
	}
	for {
		args, err := r.ReadCommand()
		if err != nil {
			if err != io.EOF {
				res.err = err.Error()
			}
			return res
		}
		check(args)
		for buffered {
			args, ok, err := r.TryReadCommand()
			if err != nil {
				res.err = err.Error()
				return res
			}
			if !ok {
				break
			}
			check(args)
		}
		r.Release()
	}
}

// FuzzParse: any input parses without panicking, within the limits, to the
// same commands and error however it is split into reads; every parsed
// command re-encoded as multibulk parses back to the same arguments; and
// the input's bytes used as arguments survive an encode/parse round trip.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
		"PING\r\nSET k \"a b\\x41\" 'c\\'d'\r\n",
		"*1\r\n$-1\r\n",
		"*0\r\n*-1\r\n\r\n*1\r\n$4\r\nPING\r\n",
		"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$600\r\n",
		"*1\r\n$3\r\nabcXY",
		"*17\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		chunk := 1
		if len(data) > 0 {
			chunk = int(data[0])%13 + 1
		}
		whole := fuzzParse(t, data, 0, false)
		for _, other := range []fuzzResult{
			fuzzParse(t, data, chunk, false),
			fuzzParse(t, data, 0, true),
			fuzzParse(t, data, chunk, true),
		} {
			if fmt.Sprint(other) != fmt.Sprint(whole) {
				t.Fatalf("parse depends on read boundaries:\n%q\nvs\n%q", whole, other)
			}
		}

		// Re-encode what was parsed: it must parse back identically.
		var enc []byte
		for _, cmd := range whole.cmds {
			args := make([][]byte, len(cmd))
			for i, a := range cmd {
				args[i] = []byte(a)
			}
			enc = AppendCommand(enc, args...)
		}
		back := fuzzParse(t, enc, chunk, true)
		if back.err != "" || fmt.Sprint(back.cmds) != fmt.Sprint(whole.cmds) {
			t.Fatalf("round trip: %q -> %q (%s)", whole.cmds, back.cmds, back.err)
		}

		// The raw input as arguments (split at 0xff), encoded and parsed.
		parts := bytes.Split(data, []byte{0xff})
		if len(parts) > fuzzLimits.MaxArgs {
			parts = parts[:fuzzLimits.MaxArgs]
		}
		enc = AppendCommand(nil, parts...)
		got := fuzzParse(t, enc, chunk, false)
		fits := len(enc) <= fuzzLimits.MaxFrameSize
		for _, p := range parts {
			fits = fits && len(p) <= fuzzLimits.MaxBulkLen
		}
		if fits {
			if got.err != "" || len(got.cmds) != 1 || fmt.Sprint(got.cmds[0]) != fmt.Sprint(strs(parts)) {
				t.Fatalf("round trip of %q: got %q (%s)", parts, got.cmds, got.err)
			}
		} else if got.err == "" {
			t.Fatalf("over-limit frame of %d bytes accepted", len(enc))
		}
	})
}
