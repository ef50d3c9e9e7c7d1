package kvdiff_test

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/kvorum/kvorum/internal/kvdiff"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/resp"
)

// replies has every kind of reply, nested.
var replies = []reply.Reply{
	reply.Nil, reply.NilArray, reply.OK, reply.Status("a\r\nb"),
	reply.Error("ERR x"), reply.Int(-7), reply.BulkString(""),
	reply.Bulk([]byte("\x00\xff\"\\")), reply.Double(1.5), reply.Double(math.Inf(-1)),
	reply.Double(-0.0), reply.Double(1e20), reply.Double(0.1),
	{Kind: reply.KindDouble, Float: 2, Str: []byte("2.000")},
	reply.Bool(true), reply.Bool(false), reply.Verbatim("text"),
	reply.Array(), reply.Array(reply.Int(1), reply.Array(reply.Nil, reply.NilArray)),
	reply.Map(reply.BulkString("k"), reply.Double(3), reply.BulkString("odd")),
	{Kind: reply.KindSet, Elems: []reply.Reply{reply.BulkString("a"), reply.Int(2)}},
	{Kind: reply.KindPush, Elems: []reply.Reply{reply.BulkString("message")}},
	reply.Pairs(reply.BulkString("m"), reply.Double(1), reply.BulkString("n"), reply.Double(2)),
	reply.NestedMap(reply.BulkString("s"), reply.Array(reply.BulkString("1-1"))),
}

// TestFromReplyMatchesWriter checks FromReply against what the resp
// package writes on the wire, read back with ReadValue.
func TestFromReplyMatchesWriter(t *testing.T) {
	for _, r := range replies {
		for _, proto := range []int{2, 3} {
			wire := resp.AppendReply(nil, r, proto)
			want, err := kvdiff.ReadValue(bufio.NewReader(bytes.NewReader(wire)))
			if err != nil {
				t.Fatalf("%q: %v", wire, err)
			}
			if got := kvdiff.FromReply(r, proto); !reflect.DeepEqual(normal(got), normal(want)) {
				t.Errorf("RESP%d %q:\n  FromReply: %s\n  wire:      %s", proto, wire, kvdiff.Render(got), kvdiff.Render(want))
			}
		}
	}
}

// normal makes empty slices nil, so that DeepEqual compares content.
func normal(v kvdiff.Value) kvdiff.Value {
	if len(v.Str) == 0 {
		v.Str = nil
	}
	if len(v.Elems) == 0 {
		v.Elems = nil
	}
	for i := range v.Elems {
		v.Elems[i] = normal(v.Elems[i])
	}
	return v
}

func TestRender(t *testing.T) {
	for _, c := range []struct {
		r      reply.Reply
		proto  int
		render string
	}{
		{reply.OK, 2, "OK"},
		{reply.Status("  indented"), 2, `(status)   indented`},
		{reply.Status(`a\b`), 2, `(status) a\\b`},
		{reply.Error("ERR no\x01"), 2, `(error) ERR no\x01`},
		{reply.Bulk([]byte("a\"\\\n\r\t\x00\xc3\xa9")), 2, `"a\"\\\n\r\t\x00\xc3\xa9"`},
		{reply.Nil, 2, "(nil)"},
		{reply.Nil, 3, "(nil)"},
		{reply.NilArray, 2, "(nil array)"},
		{reply.Double(1.5), 2, `"1.5"`},
		{reply.Double(1.5), 3, "(double) 1.5"},
		{reply.Bool(true), 3, "(true)"},
		{reply.Verbatim("x"), 3, `(verbatim txt) "x"`},
		{reply.Array(), 2, "(empty array)"},
		{reply.Array(reply.Int(1), reply.Array(reply.BulkString("a"), reply.BulkString("b"))), 2,
			"1) (integer) 1\n2) 1) \"a\"\n   2) \"b\""},
		{reply.Map(reply.BulkString("k"), reply.Array(reply.Int(1), reply.Int(2))), 3,
			"1# \"k\" => 1) (integer) 1\n          2) (integer) 2"},
		{reply.Map(), 3, "(empty map)"},
		{reply.Reply{Kind: reply.KindSet, Elems: []reply.Reply{reply.BulkString("a")}}, 3, `1~ "a"`},
	} {
		if got := kvdiff.Render(kvdiff.FromReply(c.r, c.proto)); got != c.render {
			t.Errorf("RESP%d %+v:\n got: %s\nwant: %s", c.proto, c.r, got, c.render)
		}
	}
}

func TestExpectedAndExpectedFor(t *testing.T) {
	v := func(r reply.Reply, p int) kvdiff.Value { return kvdiff.FromReply(r, p) }
	same := kvdiff.Expected("GET", v(reply.BulkString("x"), 2), v(reply.BulkString("x"), 3))
	if same != "\"x\"\n" {
		t.Errorf("same forms: %q", same)
	}
	score := reply.Double(1.5)
	oneLine := kvdiff.Expected("ZSCORE", v(score, 2), v(score, 3))
	if oneLine != "RESP2: \"1.5\"\nRESP3: (double) 1.5\n" {
		t.Errorf("one line: %q", oneLine)
	}
	pairs := reply.Pairs(reply.BulkString("a"), reply.Double(1))
	lines := kvdiff.Expected("ZRANGE", v(pairs, 2), v(pairs, 3))
	want := "RESP2:\n1) \"a\"\n2) \"1\"\nRESP3:\n1) 1) \"a\"\n   2) (double) 1\n"
	if lines != want {
		t.Errorf("several lines:\n%s\nwant:\n%s", lines, want)
	}
	for _, c := range []struct {
		recorded string
		proto    int
		want     string
	}{
		{same, 2, "\"x\"\n"}, {same, 3, "\"x\"\n"},
		{oneLine, 2, "\"1.5\"\n"}, {oneLine, 3, "(double) 1.5\n"},
		{lines, 2, "1) \"a\"\n2) \"1\"\n"}, {lines, 3, "1) 1) \"a\"\n   2) (double) 1\n"},
	} {
		if got := kvdiff.ExpectedFor(c.recorded, c.proto); got != c.want {
			t.Errorf("ExpectedFor(%q, %d) = %q, want %q", c.recorded, c.proto, got, c.want)
		}
	}
}

func TestCanonical(t *testing.T) {
	flat := reply.Array(reply.BulkString("g"), reply.BulkString("2"), reply.BulkString("f"), reply.BulkString("1"))
	m := reply.Map(flat.Elems...)
	for _, c := range []struct {
		cmd   string
		r     reply.Reply
		proto int
		want  string
	}{
		{"HGETALL", flat, 2, "1) \"f\"\n2) \"1\"\n3) \"g\"\n4) \"2\""},
		{"hgetall", m, 3, "1# \"f\" => \"1\"\n2# \"g\" => \"2\""},
		{"KEYS", flat, 2, "1) \"1\"\n2) \"2\"\n3) \"f\"\n4) \"g\""},
		{"SSCAN", reply.Array(reply.BulkString("0"), flat), 2, "1) \"0\"\n2) 1) \"1\"\n   2) \"2\"\n   3) \"f\"\n   4) \"g\""},
		{"LRANGE", flat, 2, "1) \"g\"\n2) \"2\"\n3) \"f\"\n4) \"1\""},
	} {
		in := kvdiff.FromReply(c.r, c.proto)
		before := kvdiff.Render(in)
		if got := kvdiff.Render(kvdiff.Canonical(c.cmd, in)); got != c.want {
			t.Errorf("%s:\n got: %s\nwant: %s", c.cmd, got, c.want)
		}
		if kvdiff.Render(in) != before {
			t.Errorf("%s: Canonical modified its argument", c.cmd)
		}
	}
}

func TestLoad(t *testing.T) {
	file := t.TempDir() + "/f.txt"
	text := strings.Join([]string{
		"# comment",
		"sequence", "----", "",
		"run", `SET k "a b"`, "----", "OK", "",
		"run", "XINFO HELP", "----", "1) HELP", "2) x", "",
		"sequence", "----", "",
		"run", "GET k", "----", "----", "two", "", "paragraphs", "----", "----", "",
		"run", "GET k", "----", "(nil)",
	}, "\n") + "\n"
	if err := writeFile(file, text); err != nil {
		t.Fatal(err)
	}
	seqs, err := kvdiff.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]kvdiff.Cmd{
		{
			{Line: 6, Text: `SET k "a b"`, Args: []string{"SET", "k", "a b"}, Expected: "OK\n"},
			{Line: 11, Text: "XINFO HELP", Args: []string{"XINFO", "HELP"}, Expected: "1) HELP\n2) x\n"},
		},
		{
			{Line: 20, Text: "GET k", Args: []string{"GET", "k"}, Expected: "two\n\nparagraphs\n"},
			{Line: 30, Text: "GET k", Args: []string{"GET", "k"}, Expected: "(nil)\n"},
		},
	}
	if !reflect.DeepEqual(seqs, want) {
		t.Errorf("Load:\n got: %+v\nwant: %+v", seqs, want)
	}
}

func writeFile(name, text string) error { return os.WriteFile(name, []byte(text), 0o644) }
