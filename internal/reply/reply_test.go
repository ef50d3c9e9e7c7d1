package reply

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

// Replies cross nodes (a follower forwards to the leader) in the
// AppendBinary encoding: every kind must come back as it went.
func TestReplyBinaryRoundTrip(t *testing.T) {
	all := Array(
		Nil, NilArray, OK, Error("ERR x"), Int(-7), BulkString("b"), Bulk(nil),
		Double(1.5), Double(math.Inf(-1)), Bool(true), Verbatim("v"),
		Reply{Kind: KindDouble, Float: 2.68220901489e-06, Str: []byte("0.00000268220901489")}, // GEOPOS
		Map(BulkString("k"), Int(1)), Reply{Kind: KindSet, Elems: []Reply{BulkString("s")}},
		Reply{Kind: KindPush, Elems: []Reply{BulkString("message")}},
		Pairs(BulkString("m"), Double(2), BulkString("n"), Double(-0.5)),
		Array(Pairs(), Array()),
	)
	enc := all.AppendBinary([]byte("x"))[1:]
	got, rest, err := Decode(enc)
	if err != nil || len(rest) != 0 {
		t.Fatalf("decode: %v, %d bytes left", err, len(rest))
	}
	if !reflect.DeepEqual(normalizeNilSlices(got), normalizeNilSlices(all)) {
		t.Fatalf("round trip changed the reply:\n got %#v\nwant %#v", got, all)
	}
	if _, _, err := Decode(enc[:len(enc)-1]); err == nil {
		t.Fatal("a truncated encoding decoded")
	}
}

// normalizeNilSlices makes empty Str and Elems nil, which the encoding
// does not distinguish.
func normalizeNilSlices(r Reply) Reply {
	if len(r.Str) == 0 {
		r.Str = nil
	}
	if len(r.Elems) == 0 {
		r.Elems = nil
	}
	for i := range r.Elems {
		r.Elems[i] = normalizeNilSlices(r.Elems[i])
	}
	return r
}

// UnknownCommand quotes as Redis 7's "%.128s" does: at most 128 bytes of
// the name and of the quoted arguments together, stopping at a NUL byte;
// CR and LF become spaces so the reply stays one line.
func TestUnknownCommand(t *testing.T) {
	long := strings.Repeat("a", 200)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"foo", "x", "y"}, "ERR unknown command 'foo', with args beginning with: 'x' 'y' "},
		{[]string{"fo\x00o", "x\r\ny"}, "ERR unknown command 'fo', with args beginning with: 'x  y' "},
		{[]string{long, long, "b"}, "ERR unknown command '" + long[:128] + "', with args beginning with: '" + long[:128] + "' "},
	} {
		args := make([][]byte, len(tc.args))
		for i, a := range tc.args {
			args[i] = []byte(a)
		}
		if r := UnknownCommand(args); r.Kind != KindError || string(r.Str) != tc.want {
			t.Errorf("%q: got %q", tc.args, r.Str)
		}
	}
}
