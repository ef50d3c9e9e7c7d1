package store

import (
	"encoding/binary"
	"reflect"
	"testing"
)

func TestEntryRoundTrip(t *testing.T) {
	in := &entryPayload{node: 3, ts: 1764000000123, props: []entryProposal{
		{id: 7, cmds: [][][]byte{{[]byte("SET"), []byte("a"), []byte("1")}, {[]byte("INCR"), []byte("n")}}},
		{id: 9, cmds: [][][]byte{{[]byte("DEL"), []byte("")}}},
	}}
	b := encodeEntry(in)
	if max := 24 + cmdsSize(in.props[0].cmds) + cmdsSize(in.props[1].cmds); len(b) > max {
		t.Fatalf("encoded %d bytes, over the bound %d", len(b), max)
	}
	out, err := decodeEntry(b)
	if err != nil || !reflect.DeepEqual(out, in) {
		t.Fatalf("decode: %+v, %v", out, err)
	}
	ids, err := decodeEntryIDs(b)
	if err != nil || ids.node != 3 || ids.ts != in.ts || len(ids.props) != 2 ||
		ids.props[0].id != 7 || ids.props[1].id != 9 || ids.props[0].cmds != nil || ids.props[1].cmds != nil {
		t.Fatalf("ids only: %+v, %v", ids, err)
	}
	// Every truncation is refused, by both decoders, without a panic.
	for n := 0; n < len(b); n++ {
		if _, err := decodeEntry(b[:n]); err == nil {
			t.Fatalf("decodeEntry accepted %d of %d bytes", n, len(b))
		}
		if _, err := decodeEntryIDs(b[:n]); err == nil {
			t.Fatalf("decodeEntryIDs accepted %d of %d bytes", n, len(b))
		}
	}
	if _, err := decodeEntry(append([]byte{9}, b[1:]...)); err == nil {
		t.Fatal("unknown version accepted")
	}
}

// Entries written before proposals were grouped (version 1: one proposal,
// id before node) are still read.
func TestEntryVersion1(t *testing.T) {
	b := []byte{entryVersion1}
	b = binary.AppendUvarint(b, 42) // proposal id
	b = binary.AppendUvarint(b, 2)  // node
	b = binary.AppendVarint(b, 1000)
	b = binary.AppendUvarint(b, 1) // one command
	b = binary.AppendUvarint(b, 2) // argc
	for _, a := range []string{"GET", "k"} {
		b = binary.AppendUvarint(b, uint64(len(a)))
		b = append(b, a...)
	}
	p, err := decodeEntry(b)
	want := &entryPayload{node: 2, ts: 1000, props: []entryProposal{{id: 42, cmds: [][][]byte{{[]byte("GET"), []byte("k")}}}}}
	if err != nil || !reflect.DeepEqual(p, want) {
		t.Fatalf("v1: %+v, %v", p, err)
	}
}
