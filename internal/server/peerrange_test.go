package server

import (
	"errors"
	"slices"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvorum/kvorum/internal/store"
)

// A forwarded exec names its range: decodeCmds returns it with the
// commands, and refuses range 0 and truncated payloads.
func TestForwardedExecRange(t *testing.T) {
	cmds := [][][]byte{{[]byte("SET"), []byte("k"), []byte("v")}, {[]byte("INCR"), []byte("n")}}
	payload := encodeCmds(cmds)
	rangeID, got, err := decodeCmds(payload)
	if err != nil || rangeID != firstRange || len(got) != len(cmds) {
		t.Fatalf("decoded range %d, %d commands, %v", rangeID, len(got), err)
	}
	for i := range cmds {
		if !slices.EqualFunc(got[i], cmds[i], func(a, b []byte) bool { return string(a) == string(b) }) {
			t.Fatalf("command %d: %q, want %q", i, got[i], cmds[i])
		}
	}
	other := append([]byte{9}, payload[1:]...) // range 9 (one uvarint byte, as 1 is)
	if rangeID, _, err := decodeCmds(other); err != nil || rangeID != 9 {
		t.Fatalf("range 9 payload: range %d, %v", rangeID, err)
	}
	if _, _, err := decodeCmds(append([]byte{0}, payload[1:]...)); !errors.Is(err, errBadPayload) {
		t.Fatalf("range 0: %v", err)
	}
	for n := 0; n < len(payload); n++ {
		if _, _, err := decodeCmds(payload[:n]); err == nil {
			t.Fatalf("payload cut at %d of %d decodes", n, len(payload))
		}
	}
}

// The peer handler steps a Raft message into the range it carries: one
// for a range the node has no replica of is dropped (range 1 never sees
// it), and a forwarded exec for such a range is refused as not proposed.
func TestPeerHandlerUnknownRange(t *testing.T) {
	c := newTestCluster(t, 1)
	lead := c.waitLeader()
	n := c.node(lead)
	h := (*peerHandler)(n)
	term := n.store.Replica(firstRange).Status().Term

	h.HandleRaft([]store.RaftMessage{{Range: 2, Msg: &raftpb.Message{
		Type: raftpb.MsgHeartbeat.Enum(), From: proto.Uint64(2), To: proto.Uint64(lead), Term: proto.Uint64(term + 100),
	}}})
	time.Sleep(50 * time.Millisecond) // a stepped message would be handled by now
	if st := n.store.Replica(firstRange).Status(); st.Term != term {
		t.Fatalf("range 1 stepped a message of range 2: term %d → %d", term, st.Term)
	}

	payload := encodeCmds([][][]byte{{[]byte("SET"), []byte("k"), []byte("v")}})
	payload[0] = 2 // range 2 (one uvarint byte, as 1 is)
	resp, err := h.HandleCall(testCtx(t, 5*time.Second), methodExec, payload)
	if err != nil || len(resp) == 0 || resp[0] == codeOK {
		t.Fatalf("exec for range 2: %q, %v", resp, err)
	}
	remote, ok := decodeError(resp)
	var nle *store.NotLeaderError
	if !ok || !errors.As(remote, &nle) || nle.Range != 2 {
		t.Fatalf("exec for range 2: %v, want a NotLeaderError of range 2", remote)
	}
	if v, err := c.client(lead).Get(testCtx(t, 5*time.Second), "k").Result(); err == nil {
		t.Fatalf("k = %q: the exec for range 2 was applied", v)
	}

	// The same exec for range 1 is applied.
	payload[0] = byte(firstRange)
	if resp, err := h.HandleCall(testCtx(t, 5*time.Second), methodExec, payload); err != nil || len(resp) == 0 || resp[0] != codeOK {
		t.Fatalf("exec for range 1: %q, %v", resp, err)
	}
}
