package store

import (
	"errors"
	"fmt"

	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/storage"
)

// StorageError is a failure to persist the node's state (a Ready round's
// batch, or a log truncation): the store stops, and the node with it. It
// must never keep running on a state it could not persist: Pebble has
// already applied the failed batch to its memtable (storage/fault.go). The
// node is restarted on what reached the disk and catches up from its peers.
type StorageError struct{ Err error }

func (e *StorageError) Error() string {
	what := storage.DescribeFailure(e.Err)
	fix := "after the disk is fixed"
	if what == "disk full" || what == "disk quota exceeded" {
		fix = "after space is freed"
	}
	return fmt.Sprintf("storage failure: %s: %v; node stopped; it must be restarted %s", what, e.Err, fix)
}

func (e *StorageError) Unwrap() error { return e.Err }

// Failure returns the error that stopped the store, nil while it runs.
func (s *Store) Failure() error {
	if !s.failed.Load() {
		return nil
	}
	return s.failErr
}

// DBWedged reports that the store stopped on a Pebble commit that panicked
// with Pebble's commit mutex held: DB.Close would block forever, so the
// caller must not call it (the DB is abandoned; a restart replays the WAL).
func (s *Store) DBWedged() bool {
	var ce *storage.CommitError
	return errors.As(s.Failure(), &ce) && ce.Wedged
}

// WriteGate decides whether this node accepts new proposals. It returns a
// reply (an error) for every command of a refused proposal and refuse=true.
type WriteGate func() (reply reply.Reply, refuse bool)

// SetWriteGate installs g, consulted by every Replica.Propose (client
// writes proposed here, including those forwarded by other nodes, expiry
// deletions and blocking pops; not membership changes). The node uses it
// to refuse writes while its disk is nearly full.
func (s *Store) SetWriteGate(g WriteGate) {
	if g == nil {
		s.writeGate.Store(nil)
		return
	}
	s.writeGate.Store(&g)
}

// ErrWriteRefused is what a WriteRefusedError is (errors.Is), here or
// rebuilt on a node the refusal was forwarded to (the peer wire carries
// the sentinel with the gate's message).
var ErrWriteRefused = errors.New("store: write refused by the write gate")

// WriteRefusedError is the error of a proposal that is not commands (a
// split) refused by the store's WriteGate: Msg is the gate's error reply.
type WriteRefusedError struct{ Msg string }

func (e *WriteRefusedError) Error() string { return e.Msg }

// Is makes errors.Is(err, ErrWriteRefused) hold.
func (e *WriteRefusedError) Is(target error) bool { return target == ErrWriteRefused }

// gate returns the replies of a refused proposal of n commands, or nil.
func (s *Store) gate(n int) []reply.Reply {
	g := s.writeGate.Load()
	if g == nil {
		return nil
	}
	rep, refuse := (*g)()
	if !refuse {
		return nil
	}
	out := make([]reply.Reply, n)
	for i := range out {
		out[i] = rep
	}
	return out
}
