package store

import (
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/storage"
	"github.com/kvorum/kvorum/internal/transport"
)

// envMachine is regMachine that records the ApplyEnv of every command.
type envMachine struct {
	regMachine
	mu   sync.Mutex
	envs []ApplyEnv
}

func (m *envMachine) Apply(b *pebble.Batch, args [][]byte, env ApplyEnv) reply.Reply {
	m.mu.Lock()
	m.envs = append(m.envs, env)
	m.mu.Unlock()
	return m.regMachine.Apply(b, args, env)
}

// TestApplyEnvCarriesDescriptor: the store gives the state machine the
// range id and the replica's descriptor (its slot interval and
// generation) with every command it applies.
func TestApplyEnvCarriesDescriptor(t *testing.T) {
	part := transport.NewPartitioner()
	sm := &envMachine{}
	c := &testCluster{t: t, net: transport.NewLocalNetwork(part), part: part, nodes: map[uint64]*testNode{},
		cfg: func(cfg *Config) { cfg.StateMachine = sm }}
	desc := &storage.Descriptor{RangeID: 1, StartSlot: 0, EndSlot: 8192, Generation: 4,
		Replicas: []storage.ReplicaDescriptor{{NodeID: 1, PeerAddr: transport.LocalAddr(1)}}}
	tn := &testNode{id: 1, fs: vfs.NewMem()}
	db := c.openDB(tn)
	b := db.NewBatch()
	if err := BootstrapRange(b, desc); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	c.nodes[1] = tn
	c.startNode(tn, desc)
	t.Cleanup(func() { c.stopNode(tn) })
	c.leader()
	if _, err := propose(t, tn, []string{"SET", "a", "1"}, []string{"SET", "b", "2"}); err != nil {
		t.Fatal(err)
	}
	sm.mu.Lock()
	envs := append([]ApplyEnv(nil), sm.envs...)
	sm.mu.Unlock()
	if len(envs) != 2 {
		t.Fatalf("%d applies, want 2", len(envs))
	}
	for _, env := range envs {
		if env.Range != 1 || env.Desc == nil || env.Desc.RangeID != 1 || env.Desc.StartSlot != 0 || env.Desc.EndSlot != 8192 || env.Desc.Generation != 4 {
			t.Fatalf("env range %d desc %+v, want range 1 and [0, 8192) at generation 4", env.Range, env.Desc)
		}
	}
	// The descriptor is the replica's: what Replica.Descriptor returns.
	if got := tn.store.Replica(1).Descriptor(); got.StartSlot != envs[0].Desc.StartSlot || got.EndSlot != envs[0].Desc.EndSlot || got.Generation != envs[0].Desc.Generation {
		t.Fatalf("replica descriptor %+v, env %+v", got, envs[0].Desc)
	}
}
