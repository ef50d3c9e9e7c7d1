package store

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/kvorum/kvorum/internal/storage"
)

type nopTransport struct{}

func (nopTransport) Send([]RaftMessage)     {}
func (nopTransport) SetPeer(uint64, string) {}
func (nopTransport) RemovePeer(uint64)      {}

// TestStoreHandsOutEffectsAfterCommit: what a round's applies recorded
// reaches Store.Effects only once the round's batch is committed (every
// write it names can be read from the DB), in log order, each round once.
// WAL writes are slowed down and values are large, so that effects handed
// out before the commit would be caught reading a DB that does not have
// the writes yet (checked: handing them out before the commit fails).
func TestStoreHandsOutEffectsAfterCommit(t *testing.T) {
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		switch op.Kind {
		case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo, errorfs.OpFileWrite:
			if strings.HasSuffix(op.Path, ".log") {
				time.Sleep(2 * time.Millisecond)
			}
		}
		return nil
	}))
	db, err := storage.Open("/db", storage.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	desc := (&storage.Descriptor{RangeID: 1, Replicas: []storage.ReplicaDescriptor{{NodeID: 1}}}).FullSlots()
	b := db.NewBatch()
	if err := BootstrapRange(b, desc); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	m := &regMachine{record: true}
	s := New(Config{
		NodeID: 1, DB: db, FS: fs, Dir: "/db", Transport: nopTransport{},
		TickInterval: 10 * time.Millisecond, ElectionTicks: 10, HeartbeatTicks: 1,
		StateMachine: m, Logger: testLog(),
	})
	if _, err := s.AddReplica(desc); err != nil {
		t.Fatal(err)
	}

	type round struct {
		writes    []string
		committed []bool // each write readable from the DB when handed out
	}
	rounds := make(chan []round, 1)
	go func() {
		var got []round
		for fx := range s.Effects() {
			rd := round{writes: fx.([]string)}
			for _, w := range rd.writes {
				k, v, _ := strings.Cut(w, "=")
				// n is incremented twice in one entry: its first value
				// is already overwritten.
				got1, ok := readKey(s, k)
				rd.committed = append(rd.committed, ok && (got1 == v || k == "n"))
			}
			got = append(got, rd)
		}
		rounds <- got
	}()
	s.Start()
	stopped := false
	defer func() {
		if !stopped {
			s.Stop()
		}
	}()

	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, local := s.Replica(1).Leader(); local {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no leader")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var want []string
	do := func(cmds ...[]string) {
		t.Helper()
		if _, err := proposeOn(s, cmds...); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 10; i++ {
		k, v := fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i)+strings.Repeat("x", 256<<10)
		do([]string{"SET", k, v})
		want = append(want, k+"="+v)
	}
	do([]string{"SET", "a", "1"}, []string{"INCR", "n"}, []string{"INCR", "n"})
	want = append(want, "a=1", "n=1", "n=2")

	// Every proposal has returned, so every round that applied one has
	// taken its effects (before completing its waiters) and sends them
	// after its commit even if Stop comes first: the backlog has room.
	s.Stop()
	stopped = true
	var got []string
	for i, rd := range <-rounds {
		if len(rd.writes) == 0 {
			t.Fatalf("round %d handed out empty effects", i)
		}
		for j, w := range rd.writes {
			k, _, _ := strings.Cut(w, "=")
			if !rd.committed[j] {
				t.Errorf("round %d: the write of %s handed out before it was committed", i, k)
			}
			got = append(got, w)
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		short := func(ws []string) (out []string) {
			for _, w := range ws {
				out = append(out, w[:min(len(w), 8)])
			}
			return out
		}
		t.Fatalf("effects (values cut)\n got %v\nwant %v", short(got), short(want))
	}
}
