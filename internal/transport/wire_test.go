package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvorum/kvorum/internal/storage"
)

// handFrame builds a raft batch frame field by field, as the layout in
// wire.go reads: v | from | to | count | count × ([range] | len | proto),
// the range only with v=2. It does not use the encoder, so that the two
// are checked against each other.
func handFrame(t testing.TB, v byte, from, to uint64, msgs []storage.RaftMessage) []byte {
	t.Helper()
	b := []byte{v}
	b = binary.AppendUvarint(b, from)
	b = binary.AppendUvarint(b, to)
	b = binary.AppendUvarint(b, uint64(len(msgs)))
	for _, m := range msgs {
		if v >= 2 {
			b = binary.AppendUvarint(b, uint64(m.Range))
		}
		if v == 3 {
			b = append(b, byte(m.Kind))
		}
		pb, err := proto.Marshal(m.Msg)
		if err != nil {
			t.Fatal(err)
		}
		b = binary.AppendUvarint(b, uint64(len(pb)))
		b = append(b, pb...)
	}
	return b
}

// checkDecoded fails unless frame decodes to from, to and want (messages
// and ranges, in order).
func checkDecoded(t *testing.T, what string, frame []byte, from, to uint64, want []storage.RaftMessage) {
	t.Helper()
	gf, gt, got, err := decodeBatch(frame)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if gf != from || gt != to || len(got) != len(want) {
		t.Fatalf("%s: %d→%d, %d messages; want %d→%d, %d", what, gf, gt, len(got), from, to, len(want))
	}
	for i := range want {
		if got[i].Range != want[i].Range || got[i].Kind != want[i].Kind || !proto.Equal(got[i].Msg, want[i].Msg) {
			t.Fatalf("%s: message %d: range %d %v, want range %d %v", what, i, got[i].Range, got[i].Msg, want[i].Range, want[i].Msg)
		}
	}
}

func withRanges(msgs []*raftpb.Message, ranges ...storage.RangeID) []storage.RaftMessage {
	out := make([]storage.RaftMessage, len(msgs))
	for i, m := range msgs {
		out[i] = storage.RaftMessage{Range: ranges[i%len(ranges)], Msg: m}
	}
	return out
}

// TestWireV1V2: a v=1 frame (what older nodes write) decodes with every
// message in range 1; a batch of range 1 only is still written as v=1,
// byte for byte; a batch with another range is written as v=2 and comes
// back with each message's range; malformed frames are errors, never
// panics.
func TestWireV1V2(t *testing.T) {
	kinds := everyKind(1, 2)

	// v=1, as an older node writes it, is range 1.
	v1 := handFrame(t, 1, 1, 2, ofRange1(kinds...))
	checkDecoded(t, "v1 frame", v1, 1, 2, ofRange1(kinds...))

	// Range 1 only: the same bytes as before ranges.
	frames, counts, _, err := encodeBatch(nil, 1, 2, ofRange1(kinds...))
	if err != nil {
		t.Fatal(err)
	}
	if len(frames) != 1 || counts[0] != len(kinds) || !bytes.Equal(frames[0], v1) {
		t.Fatalf("range-1 batch: %d frames (counts %v); first differs from the v1 encoding: %v",
			len(frames), counts, len(frames) == 1 && !bytes.Equal(frames[0], v1))
	}

	// Several ranges, one of them 1, and ids of one to eight uvarint
	// bytes: v=2, and the same bytes as built by hand.
	multi := withRanges(kinds, 1, 2, 300, 1<<40, 1<<63)
	frames, _, _, err = encodeBatch(nil, 1, 2, multi)
	if err != nil {
		t.Fatal(err)
	}
	v2 := handFrame(t, 2, 1, 2, multi)
	if len(frames) != 1 || !bytes.Equal(frames[0], v2) {
		t.Fatalf("multi-range batch: %d frames, not the v2 encoding", len(frames))
	}
	checkDecoded(t, "v2 frame", frames[0], 1, 2, multi)
	// A v=2 frame of range 1 only (not what this encoder writes, but valid).
	checkDecoded(t, "v2 frame of range 1", handFrame(t, 2, 3, 4, ofRange1(kinds...)), 3, 4, ofRange1(kinds...))

	// A message without a range is refused by the encoder.
	if _, _, _, err := encodeBatch(nil, 1, 2, []storage.RaftMessage{{Msg: heartbeat(1, 2)}}); !errors.Is(err, errNoRange) {
		t.Fatalf("range 0: %v, want errNoRange", err)
	}

	// Malformed frames.
	hb := ofRange1(heartbeat(1, 2))
	bad := map[string][]byte{
		"empty":             {},
		"version 0":         append([]byte{0}, v1[1:]...),
		"version 3":         append([]byte{3}, v1[1:]...),
		"range 0":           handFrame(t, 2, 1, 2, []storage.RaftMessage{{Range: 0, Msg: heartbeat(1, 2)}}),
		"truncated range":   append(handFrame(t, 2, 1, 2, nil)[:3], 1, 0x80), // count 1, range uvarint cut
		"overlong range":    append(handFrame(t, 2, 1, 2, nil)[:3], 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0),
		"count too large":   append(handFrame(t, 2, 1, 2, nil)[:3], 0xe8, 0x07, 1, 0), // count 1000
		"count too large 1": append(handFrame(t, 1, 1, 2, nil)[:3], 3, 0, 0),          // count 3, two bytes
		"count overflows":   append(handFrame(t, 2, 1, 2, nil)[:3], 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
		"trailing v1":       append(bytes.Clone(v1), 0),
		"trailing v2":       append(bytes.Clone(v2), 0),
		"trailing empty v2": append(handFrame(t, 2, 1, 2, nil), 7),
		"length too large":  append(handFrame(t, 2, 1, 2, nil)[:3], 1, 5, 100, 1, 2),
		"bad proto":         append(handFrame(t, 2, 1, 2, nil)[:3], 1, 5, 2, 0xff, 0xff),
		"v1 bad proto":      append(handFrame(t, 1, 1, 2, hb)[:4], 2, 0xff, 0xff),
	}
	// Every strict prefix of a v1 and a v2 frame.
	for _, f := range [][]byte{v1, v2} {
		for n := 0; n < len(f); n++ {
			bad[fmt.Sprintf("v%d prefix of %d bytes", f[0], n)] = f[:n]
		}
	}
	for name, f := range bad {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("%q: panic: %v", name, p)
				}
			}()
			if _, _, msgs, err := decodeBatch(f); err == nil {
				t.Fatalf("%q: decoded %d messages, want an error", name, len(msgs))
			} else if !errors.Is(err, errBadFrame) {
				t.Fatalf("%q: %v, want errBadFrame", name, err)
			}
		}()
	}
}

// A frame is v=1 or v=2 on its own: when a big batch is split, the
// frames that hold range 1 only stay v=1.
func TestWireVersionPerFrame(t *testing.T) {
	var msgs []storage.RaftMessage
	for i := 0; i < 12; i++ {
		m := msg(raftpb.MsgApp, 1, 2, 3, uint64(i))
		m.Entries = []*raftpb.Entry{{Data: bytes.Repeat([]byte{byte(i)}, maxFrameBytes/5)}}
		msgs = append(msgs, storage.RaftMessage{Range: 1, Msg: m})
	}
	msgs[11].Range = 9
	frames, counts, _, err := encodeBatch(nil, 1, 2, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if len(frames) < 2 {
		t.Fatalf("%d frames", len(frames))
	}
	sent := 0
	for i, f := range frames {
		want := byte(1)
		if i == len(frames)-1 {
			want = 2
		}
		if f[0] != want {
			t.Fatalf("frame %d of %d: v=%d, want %d", i, len(frames), f[0], want)
		}
		checkDecoded(t, "frame", f, 1, 2, msgs[sent:sent+counts[i]])
		sent += counts[i]
	}
}

// TestWireSnapHeader: a snapshot of range 1 has the v=1 header older nodes
// write, byte for byte; another range's carries it in a v=2 header; both
// decode, and malformed headers are errors.
func TestWireSnapHeader(t *testing.T) {
	snap := snapMsg(1, 2)
	pb, err := proto.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	golden1 := append([]byte{1, 1, 2}, pb...)
	golden2 := append([]byte{2, 1, 2, 0xac, 0x02}, pb...) // range 300
	for _, c := range []struct {
		rangeID storage.RangeID
		golden  []byte
	}{{1, golden1}, {300, golden2}} {
		h, err := encodeSnapHeader(1, 2, storage.RaftMessage{Range: c.rangeID, Msg: snap})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(h, c.golden) {
			t.Fatalf("range %d: header %x, want %x", c.rangeID, h, c.golden)
		}
		from, to, m, err := decodeSnapHeader(h)
		if err != nil || from != 1 || to != 2 || m.Range != c.rangeID || !proto.Equal(m.Msg, snap) {
			t.Fatalf("range %d: decoded %d→%d range %d %v, %v", c.rangeID, from, to, m.Range, m.Msg, err)
		}
	}
	if _, err := encodeSnapHeader(1, 2, storage.RaftMessage{Msg: snap}); !errors.Is(err, errNoRange) {
		t.Fatalf("range 0: %v", err)
	}
	for name, h := range map[string][]byte{
		"empty": {}, "version 3": {3, 1, 2}, "range 0": {2, 1, 2, 0}, "truncated range": {2, 1, 2, 0x80},
		"bad proto": {1, 1, 2, 0xff, 0xff}, "v2 bad proto": {2, 1, 2, 5, 0xff},
	} {
		if _, _, _, err := decodeSnapHeader(h); !errors.Is(err, errBadFrame) {
			t.Fatalf("%s: %v, want errBadFrame", name, err)
		}
	}
}

// FuzzWireDecodeBatch: decoding never panics, and what decodes encodes
// back to a frame that decodes to the same messages and ranges.
func FuzzWireDecodeBatch(f *testing.F) {
	kinds := everyKind(1, 2)[:3]
	f.Add(handFrame(f, 1, 1, 2, ofRange1(kinds...)))
	f.Add(handFrame(f, 2, 1, 2, withRanges(kinds, 1, 7, 1<<40)))
	f.Add([]byte{2, 1, 2, 1, 0x80})
	f.Add([]byte{1, 1, 2, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		from, to, msgs, err := decodeBatch(b)
		if err != nil {
			return
		}
		frames, counts, _, err := encodeBatch(nil, from, to, msgs)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		sent := 0
		for i, fr := range frames {
			checkDecoded(t, "re-encoded", fr, from, to, msgs[sent:sent+counts[i]])
			sent += counts[i]
		}
		if sent != len(msgs) {
			t.Fatalf("re-encoded %d of %d messages", sent, len(msgs))
		}
	})
}

// checkRangesCarried sends messages of three ranges and a snapshot of
// range 5 from node 1 (send) to node 2 (rec) and checks that each arrives
// with its range, in order, and that the snapshot is reported to node 1
// (rep) for range 5.
func checkRangesCarried(t *testing.T, send Sender, rec, rep *recorder) {
	t.Helper()
	var want []storage.RaftMessage
	for i := 0; i < 30; i++ {
		want = append(want, storage.RaftMessage{Range: storage.RangeID(1 + i%3), Msg: msg(raftpb.MsgApp, 1, 2, 1, uint64(i))})
	}
	send.Send(want)
	waitFor(t, "all messages", func() bool { return rec.count() >= len(want) })
	got, ranges := rec.received(), rec.receivedRanges()
	if len(got) != len(want) {
		t.Fatalf("%d messages, want %d", len(got), len(want))
	}
	for i := range want {
		if ranges[i] != want[i].Range || !proto.Equal(got[i], want[i].Msg) {
			t.Fatalf("message %d: range %d %v, want range %d %v", i, ranges[i], got[i], want[i].Range, want[i].Msg)
		}
	}
	send.Send([]storage.RaftMessage{{Range: 5, Msg: snapMsg(1, 2)}})
	if r := waitSnapReport(t, rep); r != (snapReport{5, 2, true}) {
		t.Fatalf("snapshot report %+v, want range 5 to 2 ok", r)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.snapRanges) != 1 || rec.snapRanges[0] != 5 {
		t.Fatalf("snapshot received as ranges %v, want [5]", rec.snapRanges)
	}
}

// Messages of several ranges share the stream to a node and arrive with
// their ranges; a snapshot's range crosses too, and comes back in its
// report.
func TestRangesCarried(t *testing.T) {
	checkLeaks(t)
	a, b := pair(t, Config{}, bytesSource([]byte("data")))
	checkRangesCarried(t, a.t, b.rec, a.rec)
}

// The same through Local.
func TestLocalRangesCarried(t *testing.T) {
	checkLeaks(t)
	_, ls, recs := localCluster(t, nil, 2, bytesSource([]byte("data")))
	checkRangesCarried(t, ls[1], recs[2], recs[1])
}

// Send drops a message without a range (and fails a snapshot without
// one) rather than guessing its range; the rest of the batch goes.
func TestSendNoRange(t *testing.T) {
	checkLeaks(t)
	_, ls, recs := localCluster(t, nil, 2, bytesSource([]byte("data")))
	ls[1].Send([]storage.RaftMessage{{Msg: heartbeat(1, 2)}, {Range: 3, Msg: heartbeat(1, 2)}, {Msg: snapMsg(1, 2)}})
	waitFor(t, "the message with a range", func() bool { return recs[2].count() == 1 })
	if r := waitSnapReport(t, recs[1]); r != (snapReport{0, 2, false}) {
		t.Fatalf("snapshot report %+v", r)
	}
	if got := recs[2].receivedRanges(); len(got) != 1 || got[0] != 3 {
		t.Fatalf("received ranges %v", got)
	}
	if st := ls[1].Stats(); st.MessagesDropped != 2 {
		t.Fatalf("dropped %d, want 2", st.MessagesDropped)
	}
}

// TestWireV3Kinds: a batch holding a message of a store-level kind
// (quiesce, liveness) goes out as v=3, range and kind per message, and
// comes back with both; plain batches stay v=1/v=2 (TestWireV1V2); an
// unknown kind is a malformed frame.
func TestWireV3Kinds(t *testing.T) {
	msgs := withRanges(everyKind(1, 2), 1, 7)
	msgs[0].Kind = storage.MsgLiveness
	msgs[1].Kind = storage.MsgQuiesce
	frames, counts, _, err := encodeBatch(nil, 1, 2, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if len(frames) != 1 || counts[0] != len(msgs) || frames[0][0] != 3 {
		t.Fatalf("%d frames, version %d; want one v=3 frame", len(frames), frames[0][0])
	}
	if want := handFrame(t, 3, 1, 2, msgs); !bytes.Equal(frames[0], want) {
		t.Fatalf("v3 frame differs from the layout")
	}
	checkDecoded(t, "v3 frame", frames[0], 1, 2, msgs)
	bad := handFrame(t, 3, 1, 2, msgs[:1])
	bad[5] = byte(storage.MaxMsgKind) + 1 // v | from | to | count | range | kind
	if _, _, _, err := decodeBatch(bad); !errors.Is(err, errBadFrame) {
		t.Fatalf("unknown kind: %v, want errBadFrame", err)
	}
}
