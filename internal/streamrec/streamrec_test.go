package streamrec

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"testing"

	"github.com/kvorum/kvorum/internal/streamid"
)

// The encodings are kvorum's storage format: these bytes must not change.
func TestEncodingsAreStable(t *testing.T) {
	st := State{Length: 1, Last: streamid.ID{Ms: 2, Seq: 3}, MaxDel: streamid.ID{Ms: 4, Seq: 5}, Added: 6,
		First: streamid.ID{Ms: 7, Seq: 8}, Appended: 9, TailNode: 10, TailCount: 11, Nodes: 12, Groups: 13}
	u := func(n byte) string { return "00000000000000" + hex.EncodeToString([]byte{n}) }
	for _, c := range []struct {
		name string
		got  []byte
		want string
	}{
		{"state", st.Encode(), u(1) + u(2) + u(3) + u(4) + u(5) + u(6) + u(7) + u(8) + u(9) + u(10) + u(11) + u(12) + u(13)},
		{"node", Node{ID: 1, Live: 2, Last: streamid.ID{Ms: 3, Seq: 4}}.Encode(), u(2) + u(3) + u(4)},
		{"node elem", NodeElem(1), "6e" + u(1)},
		{"entry elem", EntryElem(streamid.ID{Ms: 1, Seq: 2}), "65" + u(1) + u(2)},
		{"entry", EncodeEntry(5, [][]byte{[]byte("f"), []byte("vv")}), u(5) + "02" + "0166" + "027676"},
		{"group", (&Group{Last: streamid.ID{Ms: 1, Seq: 2}, Read: -1, PEL: 3, Consumers: 4}).Encode(), u(1) + u(2) + "ffffffffffffffff" + u(3) + u(4)},
		{"consumer", (&Consumer{Seen: 1, PEL: 2}).Encode(), u(1) + u(2)},
		{"nack", (&NACK{Time: 1, Count: 2, Consumer: []byte("c")}).Encode(), u(1) + u(2) + "63"},
		{"group elem", GroupElem([]byte("g")), "6767"},
		{"consumer elem", ConsumerElem([]byte("g"), []byte("c")), "630167" + "63"},
		{"pel elem", PELElem([]byte("g"), streamid.ID{Ms: 1, Seq: 2}), "700167" + u(1) + u(2)},
		{"cons pel elem", ConsPELElem([]byte("g"), []byte("c"), streamid.ID{Ms: 1, Seq: 2}), "710167" + "0163" + u(1) + u(2)},
	} {
		if got := hex.EncodeToString(c.got); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestRoundTrips(t *testing.T) {
	st := State{Length: 1, Last: streamid.ID{Ms: 2, Seq: 3}, Added: 6, First: streamid.ID{Ms: 7}, Nodes: 12}
	if got := DecodeState(st.Encode()); got != st {
		t.Errorf("state %+v", got)
	}
	if got := DecodeState([]byte{1}); got != (State{}) {
		t.Errorf("short state %+v", got)
	}
	n := Node{ID: 7, Live: 2, Last: streamid.ID{Ms: 3, Seq: 4}}
	if got, ok := DecodeNodeElem(NodeElem(7), n.Encode()); !ok || !reflect.DeepEqual(got, n) {
		t.Errorf("node %+v %v", got, ok)
	}
	if _, ok := DecodeNode(7, []byte{1}); ok {
		t.Error("short node decoded")
	}
	fields := [][]byte{[]byte("f"), {}, []byte("v\x00")}
	v := EncodeEntry(9, fields)
	if got := EntryFields(v); EntryNode(v) != 9 || len(got) != 3 || !bytes.Equal(bytes.Join(got, []byte("|")), []byte("f||v\x00")) {
		t.Errorf("entry %d %q", EntryNode(v), EntryFields(v))
	}
	if got := EntryFields(v[:len(v)-1]); len(got) != 2 {
		t.Errorf("damaged entry: %q", got)
	}
	id := streamid.ID{Ms: 5, Seq: 6}
	if got, ok := EntryID(EntryElem(id)); !ok || got != id {
		t.Errorf("EntryID %v %v", got, ok)
	}
	if PELID(PELElem([]byte("g"), id)) != id || PELID(ConsPELElem([]byte("g"), []byte("c"), id)) != id {
		t.Error("PELID")
	}
	g := &Group{Name: []byte("g"), Last: id, Read: 4, PEL: 3, Consumers: 2}
	if got := DecodeGroup([]byte("g"), g.Encode()); !reflect.DeepEqual(got, g) {
		t.Errorf("group %+v", got)
	}
	if got := DecodeGroup([]byte("g"), nil); got.Read != ReadUnknown {
		t.Errorf("empty group %+v", got)
	}
	c := &Consumer{Name: []byte("c"), Seen: 5, PEL: 1}
	if got := DecodeConsumer([]byte("c"), c.Encode()); !reflect.DeepEqual(got, c) {
		t.Errorf("consumer %+v", got)
	}
	k := &NACK{Time: 5, Count: 2, Consumer: []byte("c")}
	if got := DecodeNACK(k.Encode()); !reflect.DeepEqual(got, k) {
		t.Errorf("nack %+v", got)
	}
}

// Element keys sort as Redis orders what they stand for: entries and
// pending entries by ID, a group's records apart from another's.
func TestElementOrder(t *testing.T) {
	a, b := streamid.ID{Ms: 1, Seq: 9}, streamid.ID{Ms: 2}
	if bytes.Compare(EntryElem(a), EntryElem(b)) >= 0 {
		t.Error("entries out of order")
	}
	if bytes.Compare(PELElem([]byte("g"), a), PELElem([]byte("g"), b)) >= 0 {
		t.Error("PEL out of order")
	}
	if bytes.HasPrefix(ConsumerElem([]byte("gg"), []byte("c")), GroupPrefix(KindConsumer, []byte("g"))) {
		t.Error("group g's prefix covers group gg's consumers")
	}
}

func TestLag(t *testing.T) {
	id := func(ms uint64) streamid.ID { return streamid.ID{Ms: ms} }
	for _, c := range []struct {
		name string
		st   State
		g    Group
		lag  int64
		ok   bool
	}{
		{"nothing added", State{}, Group{Read: ReadUnknown}, 0, true},
		{"read known, no tombstones", State{Length: 5, Added: 5, Last: id(5), First: id(1)}, Group{Read: 2, Last: id(2)}, 3, true},
		{"deleted after the group's position", State{Length: 4, Added: 5, Last: id(5), First: id(1), MaxDel: id(3)}, Group{Read: 2, Last: id(2)}, 0, false},
		{"at the end", State{Length: 4, Added: 5, Last: id(5), First: id(1), MaxDel: id(3)}, Group{Read: ReadUnknown, Last: id(5)}, 0, true},
		{"before the first entry", State{Length: 3, Added: 5, Last: id(5), First: id(3)}, Group{Read: ReadUnknown, Last: id(1)}, 3, true},
		{"at the first entry", State{Length: 3, Added: 5, Last: id(5), First: id(3)}, Group{Read: ReadUnknown, Last: id(3)}, 2, true},
		{"past the last ID", State{Length: 3, Added: 5, Last: id(5), First: id(3)}, Group{Read: ReadUnknown, Last: id(6)}, 0, false},
		{"empty stream", State{Added: 5, Last: id(5)}, Group{Read: ReadUnknown, Last: id(2)}, 0, true},
	} {
		lag, ok := c.st.Lag(&c.g)
		if lag != c.lag || ok != c.ok {
			t.Errorf("%s: Lag = %d, %v; want %d, %v", c.name, lag, ok, c.lag, c.ok)
		}
	}
}
