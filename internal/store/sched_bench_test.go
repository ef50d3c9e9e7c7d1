package store

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/kvorum/kvorum/internal/storage"
	"github.com/kvorum/kvorum/internal/transport"
)

// This file uses only what the store had before its scheduler, so that it
// runs unchanged on both sides of the comparison.

// drain runs Ready rounds until none is due.
func drain(b *testing.B, s *Store) {
	for {
		more, err := s.processReady()
		if err != nil {
			b.Fatal(err)
		}
		if !more {
			return
		}
	}
}

// BenchmarkIdleRanges is the cost of one tick (Tick and the Ready rounds
// it causes) on a store hosting 1,000 idle ranges (single-member ranges:
// no network), once every range has a leader and its one write applied.
func BenchmarkIdleRanges(b *testing.B) {
	const ranges = 1000
	db, err := storage.Open("/db", storage.Options{FS: vfs.NewMem()})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	batch := db.NewBatch()
	var descs []*storage.Descriptor
	for k := 1; k <= ranges; k++ {
		d := &storage.Descriptor{RangeID: storage.RangeID(k), Replicas: []storage.ReplicaDescriptor{{NodeID: 1}}}
		if err := BootstrapRange(batch, d); err != nil {
			b.Fatal(err)
		}
		descs = append(descs, d)
	}
	if err := batch.Commit(pebble.Sync); err != nil {
		b.Fatal(err)
	}
	s := New(Config{NodeID: 1, DB: db, FS: vfs.NewMem(), Dir: "/snaps", Transport: nopTransport{},
		ElectionTicks: 10, HeartbeatTicks: 1, StateMachine: &regMachine{}, Logger: testLog()})
	for _, d := range descs {
		if _, err := s.AddReplica(d); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < 40; i++ {
		s.Tick()
		drain(b, s)
	}
	for _, r := range s.Replicas() {
		if _, local := r.Leader(); !local {
			b.Fatalf("range %d has no leader", r.RangeID())
		}
	}
	for i := 0; i < 10; i++ {
		s.Tick()
		drain(b, s)
	}
	b.ResetTimer()
	for b.Loop() {
		s.Tick()
		drain(b, s)
	}
}

// BenchmarkSingleRangeWrites is the default cluster's write path: three
// stores of one range over transport.Local (memory FS), 16 writers on the
// leader, each write one SET proposal. ns/op is the cluster's time per
// write (2 cores shared by the three stores).
func BenchmarkSingleRangeWrites(b *testing.B) {
	part := transport.NewPartitioner()
	net := transport.NewLocalNetwork(part)
	desc := (&storage.Descriptor{RangeID: 1}).FullSlots()
	for id := uint64(1); id <= 3; id++ {
		desc.Replicas = append(desc.Replicas, storage.ReplicaDescriptor{NodeID: storage.NodeID(id), PeerAddr: transport.LocalAddr(id)})
	}
	var stores []*Store
	for id := uint64(1); id <= 3; id++ {
		fs := vfs.NewMem()
		db, err := storage.Open("/db", storage.Options{FS: fs})
		if err != nil {
			b.Fatal(err)
		}
		batch := db.NewBatch()
		if err := BootstrapRange(batch, desc); err != nil {
			b.Fatal(err)
		}
		if err := batch.Commit(pebble.Sync); err != nil {
			b.Fatal(err)
		}
		lt := &lazyTransport{}
		s := New(Config{NodeID: storage.NodeID(id), DB: db, FS: fs, Dir: "/db", Transport: lt,
			TickInterval: 10 * time.Millisecond, ElectionTicks: 10, HeartbeatTicks: 1,
			SnapshotThreshold: 10000, StateMachine: &regMachine{}, Logger: testLog()})
		lt.t = net.Register(id, handler{s}, func(m *raftpb.Message) (io.ReadCloser, error) { return s.OpenSnapshot(m.GetSnapshot()) })
		if _, err := s.AddReplica(desc); err != nil {
			b.Fatal(err)
		}
		s.Start()
		stores = append(stores, s)
		defer func() { _ = lt.t.Close(); s.Stop(); _ = db.Close() }()
	}
	var lead *Store
	for deadline := time.Now().Add(10 * time.Second); lead == nil; {
		for _, s := range stores {
			if _, local := s.Replica(1).Leader(); local {
				lead = s
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("no leader")
		}
		time.Sleep(5 * time.Millisecond)
	}
	var n atomic.Int64
	b.SetParallelism(8) // 16 writers on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := lead.Replica(1).Propose(ctx, [][][]byte{{[]byte("SET"), []byte(fmt.Sprintf("k%d", i%1000)), []byte("v")}})
			cancel()
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
}
