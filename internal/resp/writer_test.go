package resp

import (
	"math"
	"testing"

	"github.com/kvorum/kvorum/internal/reply"
)

func TestAppendReply(t *testing.T) {
	nested := reply.Array(reply.Int(1), reply.Array(reply.BulkString("a"), reply.Nil), reply.NilArray)
	tests := []struct {
		name         string
		r            reply.Reply
		resp2, resp3 string
	}{
		{"nil", reply.Nil, "$-1\r\n", "_\r\n"},
		{"nil array", reply.NilArray, "*-1\r\n", "_\r\n"},
		{"status", reply.OK, "+OK\r\n", "+OK\r\n"},
		{"status newline", reply.Status("a\r\nb"), "+a  b\r\n", "+a  b\r\n"},
		{"error", reply.Error("ERR bad\nthing"), "-ERR bad thing\r\n", "-ERR bad thing\r\n"},
		{"int", reply.Int(-42), ":-42\r\n", ":-42\r\n"},
		{"bulk", reply.BulkString("a\r\nb"), "$4\r\na\r\nb\r\n", "$4\r\na\r\nb\r\n"},
		{"empty bulk", reply.Bulk(nil), "$0\r\n\r\n", "$0\r\n\r\n"},
		{"array", nested, "*3\r\n:1\r\n*2\r\n$1\r\na\r\n$-1\r\n*-1\r\n", "*3\r\n:1\r\n*2\r\n$1\r\na\r\n_\r\n_\r\n"},
		{"empty array", reply.Array(), "*0\r\n", "*0\r\n"},
		{"double", reply.Double(1.5), "$3\r\n1.5\r\n", ",1.5\r\n"},
		{"double 17g", reply.Double(1.1), "$18\r\n1.1000000000000001\r\n", ",1.1000000000000001\r\n"},
		{"double int", reply.Double(3), "$1\r\n3\r\n", ",3\r\n"},
		{"double inf", reply.Double(math.Inf(1)), "$3\r\ninf\r\n", ",inf\r\n"},
		{"double -inf", reply.Double(math.Inf(-1)), "$4\r\n-inf\r\n", ",-inf\r\n"},
		{"double nan", reply.Double(math.NaN()), "$3\r\nnan\r\n", ",nan\r\n"},
		{"map", reply.Map(reply.BulkString("a"), reply.Int(1), reply.BulkString("b"), reply.Double(2.5)),
			"*4\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n$3\r\n2.5\r\n", "%2\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n,2.5\r\n"},
		{"set", reply.Reply{Kind: reply.KindSet, Elems: []reply.Reply{reply.BulkString("x"), reply.Status("y")}},
			"*2\r\n$1\r\nx\r\n+y\r\n", "~2\r\n$1\r\nx\r\n+y\r\n"},
		{"pairs", reply.Pairs(reply.BulkString("a"), reply.Double(1), reply.BulkString("b"), reply.Double(2.5)),
			"*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$3\r\n2.5\r\n", "*2\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,2.5\r\n"},
		{"empty pairs", reply.Pairs(), "*0\r\n", "*0\r\n"},
		{"bool true", reply.Bool(true), ":1\r\n", "#t\r\n"},
		{"bool false", reply.Bool(false), ":0\r\n", "#f\r\n"},
		{"verbatim", reply.Verbatim("# Server\r\nx:1\r\n"), "$15\r\n# Server\r\nx:1\r\n\r\n", "=19\r\ntxt:# Server\r\nx:1\r\n\r\n"},
		{"unknown kind", reply.Reply{Kind: 200}, "-ERR internal error: reply of unknown kind 200\r\n", "-ERR internal error: reply of unknown kind 200\r\n"},
	}
	for _, tc := range tests {
		if got := string(AppendReply(nil, tc.r, 2)); got != tc.resp2 {
			t.Errorf("%s RESP2: got %q want %q", tc.name, got, tc.resp2)
		}
		if got := string(AppendReply([]byte("pre"), tc.r, 3)); got != "pre"+tc.resp3 {
			t.Errorf("%s RESP3: got %q want %q", tc.name, got, "pre"+tc.resp3)
		}
	}
	push := []reply.Reply{reply.BulkString("message"), reply.BulkString("ch"), reply.BulkString("hi")}
	if got := string(AppendPush(nil, push, 3)); got != ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n" {
		t.Errorf("push RESP3: %q", got)
	}
	if got := string(AppendPush(nil, push, 2)); got != "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n" {
		t.Errorf("push RESP2: %q", got)
	}
}

func BenchmarkAppendReply(b *testing.B) {
	r := reply.Array(reply.BulkString("field"), reply.Int(42), reply.Double(1.5), reply.Nil, reply.OK)
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for range b.N {
		buf = AppendReply(buf[:0], r, 3)
	}
}

// A double that carries its text (GEOPOS coordinates) is sent as that text
// in both protocols, as Redis does.
func TestDoubleWithText(t *testing.T) {
	r := reply.Reply{Kind: reply.KindDouble, Float: 2.68220901489e-06, Str: []byte("0.00000268220901489")}
	if got := string(AppendReply(nil, r, 2)); got != "$19\r\n0.00000268220901489\r\n" {
		t.Errorf("RESP2: %q", got)
	}
	if got := string(AppendReply(nil, r, 3)); got != ",0.00000268220901489\r\n" {
		t.Errorf("RESP3: %q", got)
	}
	if got := string(AppendReply(nil, reply.Double(1.5), 2)); got != "$3\r\n1.5\r\n" {
		t.Errorf("plain double: %q", got)
	}
}
