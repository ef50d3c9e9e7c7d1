package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/admin"
	"github.com/kvorum/kvorum/internal/storage"
	"github.com/kvorum/kvorum/internal/store"
)

// roundTrip encodes err and decodes it again, as the other node would.
func roundTrip(t *testing.T, err error) error {
	t.Helper()
	got, ok := decodeError(appendError(nil, err))
	if !ok {
		t.Fatalf("%v: does not decode", err)
	}
	if got.Error() != err.Error() {
		t.Fatalf("%v: decodes as %q", err, got.Error())
	}
	return got
}

func TestPeerErrorSentinelsRoundTrip(t *testing.T) {
	for _, s := range wireSentinels {
		if got := roundTrip(t, s.err); got != s.err {
			t.Errorf("code %d: bare %v decodes as %#v, want the sentinel itself", s.code, s.err, got)
		}
		wrapped := fmt.Errorf("add learner 4: %w", s.err)
		if got := roundTrip(t, wrapped); !errors.Is(got, s.err) {
			t.Errorf("code %d: %v decodes as %#v, not Is the sentinel", s.code, wrapped, got)
		}
	}
	codes := map[byte]bool{codeOK: true, codeNotLeader: true, codeText: true, codeStorage: true}
	for _, s := range wireSentinels {
		if codes[s.code] {
			t.Errorf("code %d used twice", s.code)
		}
		codes[s.code] = true
	}
}

func TestPeerErrorNotLeaderRoundTrip(t *testing.T) {
	for _, nle := range []*store.NotLeaderError{
		{Range: 1, Leader: 3, LeaderAddr: "10.0.0.3:7379"},
		{Range: 7, Leader: 0},
	} {
		var got *store.NotLeaderError
		if err := roundTrip(t, nle); !errors.As(err, &got) || *got != *nle {
			t.Errorf("%v: decodes as %#v", nle, err)
		}
		wrapped := fmt.Errorf("promote 4: %w", nle)
		if err := roundTrip(t, wrapped); !errors.As(err, &got) || *got != *nle {
			t.Errorf("%v: decodes as %#v", wrapped, err)
		}
	}
}

func TestPeerErrorStorageRoundTrip(t *testing.T) {
	for _, cause := range []error{
		&fs.PathError{Op: "write", Path: "/data/000012.log", Err: syscall.ENOSPC},
		fmt.Errorf("truncate log: %w", &fs.PathError{Op: "sync", Path: "/data/MANIFEST", Err: syscall.EIO}),
		syscall.EDQUOT,
		errors.New("pebble commit panicked: boom"),
	} {
		se := &store.StorageError{Err: cause}
		err := roundTrip(t, se) // the text includes storage.DescribeFailure's verdict
		var got *store.StorageError
		if !errors.As(err, &got) {
			t.Fatalf("%v: decodes as %#v", se, err)
		}
		if want, have := storage.DescribeFailure(cause), storage.DescribeFailure(got.Err); want != have {
			t.Errorf("%v: described as %q, want %q", se, have, want)
		}
		var errno syscall.Errno
		if errors.As(cause, &errno) && !errors.Is(err, errno) {
			t.Errorf("%v: not Is %v", se, errno)
		}
	}
}

func TestPeerErrorText(t *testing.T) {
	err := roundTrip(t, errors.New("disk on fire"))
	for _, s := range wireSentinels {
		if errors.Is(err, s.err) {
			t.Errorf("an error without a code decodes as %v", s.err)
		}
	}
}

// TestPeerErrorOldFrames: exec responses of nodes older than typed errors
// still decode, and an older decoder reads what it knows of new frames.
func TestPeerErrorOldFrames(t *testing.T) {
	cases := []struct {
		frame []byte
		check func(error) bool
	}{
		{binary.AppendUvarint([]byte{1}, 3), func(err error) bool {
			var nle *store.NotLeaderError
			return errors.As(err, &nle) && *nle == store.NotLeaderError{Range: firstRange, Leader: 3}
		}},
		{[]byte{2}, func(err error) bool { return err == store.ErrProposalDropped }},
		{[]byte{3}, func(err error) bool { return err == store.ErrAmbiguous }},
		{append([]byte{4}, "store: stopped"...), func(err error) bool { return err.Error() == "store: stopped" }},
	}
	for _, c := range cases {
		err, ok := decodeError(c.frame)
		if !ok || !c.check(err) {
			t.Errorf("%q: decodes as %#v, %v", c.frame, err, ok)
		}
	}
	// What an old node reads: the status byte, then for not leader the
	// leader's id; it ignores anything after.
	b := appendError(nil, &store.NotLeaderError{Range: 1, Leader: 5, LeaderAddr: "h:1"})
	if l, n := binary.Uvarint(b[1:]); b[0] != 1 || n <= 0 || l != 5 {
		t.Errorf("not leader frame %q: an old node reads leader %d", b, l)
	}
	if b := appendError(nil, store.ErrAmbiguous); len(b) != 1 || b[0] != 3 {
		t.Errorf("ambiguous frame %q", b)
	}
	if b := appendError(nil, errors.New("x")); string(b) != "\x04x" {
		t.Errorf("text frame %q", b)
	}
	// Malformed frames are refused, not guessed at.
	for _, bad := range [][]byte{nil, {0}, {1}, {1, 3, 1, 9, 'a'}, {19, 0, 5}, {2, 9}} {
		if err, ok := decodeError(bad); ok {
			t.Errorf("%q decodes as %v", bad, err)
		}
	}
}

// TestForwardedMembershipErrorsAreTyped: a membership change asked of a
// follower runs on the leader; its refusal comes back as the same typed
// error, not just its text.
func TestForwardedMembershipErrorsAreTyped(t *testing.T) {
	c := newTestCluster(t, 3)
	lead := c.waitLeader()
	follower := lead%3 + 1
	n := c.node(follower)
	ctx := testCtx(t, 20*time.Second)

	err := n.AddMember(ctx, lead, c.cfgs[lead].PeerAddr)
	if !errors.Is(err, admin.ErrMemberExists) {
		t.Fatalf("adding a voter again through a follower: %v", err)
	}
	if code := admin.StatusCode(err); code != 409 {
		t.Errorf("admin status %d for %v", code, err)
	}
	err = n.TransferLeader(ctx, 99)
	if !errors.Is(err, admin.ErrUnknownMember) {
		t.Fatalf("transfer to a non-member through a follower: %v", err)
	}
	if code := admin.StatusCode(err); code != 404 {
		t.Errorf("admin status %d for %v", code, err)
	}
	var nle *store.NotLeaderError
	if errors.As(err, &nle) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("unexpected identity: %v", err)
	}
}

// TestPeerErrorWriteRefused: a split refused by the leader's write gate
// (store.WriteRefusedError) crosses the peer wire as store.ErrWriteRefused
// with the gate's text, so the node that forwarded it tells a full disk
// (isDiskFull, HTTP 507) by type, not by its text.
func TestPeerErrorWriteRefused(t *testing.T) {
	msg := "ERR disk full on node 2: 1 MiB free"
	got, ok := decodeError(appendError(nil, &store.WriteRefusedError{Msg: msg}))
	if !ok || !isDiskFull(got) || got.Error() != msg {
		t.Fatalf("rebuilt %v (%T): isDiskFull %v", got, got, isDiskFull(got))
	}
	if isDiskFull(errors.New(msg)) {
		t.Fatal("a plain error with the same text counts as a full disk")
	}
}
