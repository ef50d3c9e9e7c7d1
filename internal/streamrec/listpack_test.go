package streamrec

import (
	"encoding/hex"
	"reflect"
	"strings"
	"testing"

	"github.com/kvorum/kvorum/internal/streamid"
)

// Sizes of listpack elements, by listpack.c's encodings.
func TestListpackSizes(t *testing.T) {
	for _, c := range []struct {
		s    string
		want uint64
	}{
		{"0", 2}, {"127", 2}, {"128", 3}, {"-1", 3}, {"-4096", 3}, {"4095", 3}, {"4096", 4},
		{"-32768", 4}, {"32768", 5}, {"8388607", 5}, {"8388608", 6}, {"2147483647", 6}, {"2147483648", 10},
		{"9223372036854775807", 10}, {"-9223372036854775808", 10},
		{"9223372036854775808", 1 + 19 + 1}, {"-0", 4}, {"007", 5}, {"+5", 4}, {"", 2}, {"-", 3}, {"1.5", 5},
		{strings.Repeat("a", 63), 65}, {strings.Repeat("a", 64), 67}, {strings.Repeat("a", 125), 128},
		{strings.Repeat("a", 126), 130}, {strings.Repeat("a", 4095), 4099}, {strings.Repeat("a", 4096), 4103},
		{strings.Repeat("a", 20000), 20008},
	} {
		if got := LPStringSize([]byte(c.s)); got != c.want {
			t.Errorf("LPStringSize(%.20q, len %d) = %d, want %d", c.s, len(c.s), got, c.want)
		}
	}
}

// A node's size as Redis's lpBytes: a new node of one entry "f v", then a
// second entry with the same field, then one with other fields.
func TestNodeBytes(t *testing.T) {
	fv := func(s ...string) [][]byte {
		out := make([][]byte, len(s))
		for i, x := range s {
			out[i] = []byte(x)
		}
		return out
	}
	id := streamid.ID{Ms: 5, Seq: 1}
	n := NewNode(3, id, fv("f", "v"))
	n.Append(id, fv("f", "v"))
	// header 6 + count 2 + deleted 2 + num-fields 2 + "f" 3 + terminator 2;
	// entry: flags 2 + ms 2 + seq 2 + "v" 3 + lp-count 2; end 1.
	if got := n.LPBytes(); got != 6+2+2+2+3+2+11+1 {
		t.Errorf("one entry: %d", got)
	}
	n.Append(streamid.ID{Ms: 6, Seq: 0}, fv("f", "w"))   // seq diff -1: 3 bytes
	n.Append(streamid.ID{Ms: 7}, fv("g", "1", "h", "2")) // other fields
	want := uint64(6+2+2+2+3+2+11+1) + (2 + 2 + 3 + 3 + 2) + (2 + 2 + 3 + 2 + 3 + 2 + 3 + 2 + 2)
	if got := n.LPBytes(); got != want {
		t.Errorf("three entries: %d, want %d", got, want)
	}
	n.Live-- // one marked deleted: the deleted count takes the same size
	if got := n.LPBytes(); got != want {
		t.Errorf("after a deletion: %d, want %d", got, want)
	}
	if !n.Full(fv("f", strings.Repeat("x", 4096)), 4096, 100) || n.Full(fv("f", "v"), 4096, 100) || !n.Full(fv("f", "v"), 4096, 3) {
		t.Error("Full")
	}
	if n.Full(fv("f", strings.Repeat("x", 4096)), 0, 0) {
		t.Error("Full without limits")
	}
	got, ok := DecodeNodeElem(NodeElem(3), n.Encode())
	if !ok || !reflect.DeepEqual(got, n) {
		t.Errorf("round trip %+v", got)
	}
	// The format: the older record, then master, added, bytes, fields.
	u := func(v byte) string { return "00000000000000" + hex.EncodeToString([]byte{v}) }
	if h := hex.EncodeToString(Node{Live: 2, Last: streamid.ID{Ms: 3, Seq: 4}, Exact: true, Master: streamid.ID{Ms: 5, Seq: 6},
		Added: 7, Bytes: 8, Fields: [][]byte{[]byte("f")}}.Encode()); h != u(2)+u(3)+u(4)+u(5)+u(6)+u(7)+u(8)+"01"+"0166" {
		t.Errorf("node encoding %s", h)
	}
	old := Node{ID: 3, Live: 2, Last: id}
	if got, _ := DecodeNode(3, old.Encode()); got.Exact || !got.Full(nil, 0, 0) || got.Key() != id {
		t.Errorf("older record %+v", got)
	}
}

// RaxNodes against trees counted by hand.
func TestRaxNodes(t *testing.T) {
	id := func(ms, seq uint64) streamid.ID { return streamid.ID{Ms: ms, Seq: seq} }
	for _, c := range []struct {
		keys []streamid.ID
		want int64
	}{
		{nil, 1},
		{[]streamid.ID{id(1, 0)}, 2},
		{[]streamid.ID{id(1, 0), id(1, 1)}, 4},           // common prefix of 15 bytes, a branch, 2 leaves
		{[]streamid.ID{id(1, 0), id(1, 1), id(1, 2)}, 5}, // a third child of the same branch
		{[]streamid.ID{id(1, 0), id(2, 0)}, 6},           // branch at byte 8: 2 runs of 7 bytes
		{[]streamid.ID{id(1, 0), id(1<<63, 0)}, 5},       // branch at the root
	} {
		if got := RaxNodes(c.keys); got != c.want {
			t.Errorf("RaxNodes(%v) = %d, want %d", c.keys, got, c.want)
		}
	}
}
