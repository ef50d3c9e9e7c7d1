package reply

import (
	"math"
	"reflect"
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
