package torture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kvorum/kvorum/internal/server"
	"github.com/kvorum/kvorum/internal/testport"
)

// slot is one seat of the cluster: the node currently in it, its
// filesystem and its clock. A membership change puts a new node (new id,
// new filesystem) in the seat.
type slot struct {
	id     uint64
	cfg    server.Config
	fs     *vfs.MemFS
	node   *server.Node // nil while crashed
	offset atomic.Int64 // clock offset in ms
	// dead is set when the node stopped by itself (a fatal storage or
	// raft error); it is not restarted.
	dead atomic.Bool
}

// cluster is N in-process nodes on 127.0.0.1 sharing one faultyNet.
type cluster struct {
	opts   Config
	net    *faultyNet
	mu     sync.Mutex // serialises node lifecycle (crash, restart, replace)
	slots  []*slot
	nextID uint64
	logf   func(string, ...any)
	snaps  atomic.Int64 // restarts/joins that had to catch up (for the report)

	maxAhead atomic.Int64 // ms: the furthest any node's clock ran ahead

	diedMu sync.Mutex
	died   []string // nodes that stopped by themselves, and why
}

// watch records a node stopping by itself.
func (c *cluster) watch(s *slot, n *server.Node) {
	go func() {
		err, ok := <-n.Done()
		if !ok || err == nil {
			return
		}
		s.dead.Store(true)
		c.net.setDown(n.ID(), true)
		c.diedMu.Lock()
		c.died = append(c.died, fmt.Sprintf("node %d stopped by itself: %v", n.ID(), err))
		c.diedMu.Unlock()
		c.logf("node %d stopped by itself: %v", n.ID(), err)
	}()
}

// freeAddr: a crashed node restarts on its own addresses, which ports
// from ":0" (ephemeral) would not guarantee; see package testport.
func freeAddr() (string, error) { return testport.Addr() }

func (c *cluster) baseConfig(s *slot) (server.Config, error) {
	ca, err := freeAddr()
	if err != nil {
		return server.Config{}, err
	}
	pa, err := freeAddr()
	if err != nil {
		return server.Config{}, err
	}
	return server.Config{
		ID:                s.id,
		DataDir:           fmt.Sprintf("/node-%d", s.id),
		FS:                s.fs,
		ClientAddr:        ca,
		PeerAddr:          pa,
		AdminAddr:         "-",
		TickInterval:      10 * time.Millisecond,
		ElectionTicks:     10,
		HeartbeatTicks:    1,
		SnapshotThreshold: 40,
		RequestTimeout:    time.Second,
		LeaseReads:        true, // as `kvorum start` by default
		PeerInterceptor:   c.net,
		Logger:            c.nodeLogger(s.id),
		Now:               func() int64 { return time.Now().UnixMilli() + s.offset.Load() },
		Unsafe:            c.opts.Unsafe,
	}, nil
}

// nodeLogger is node id's logger: discarded, or with Config.NodeLogDir
// appended to NodeLogDir/seed-SEED-node-ID.log (restarts included).
func (c *cluster) nodeLogger(id uint64) *slog.Logger {
	if c.opts.NodeLogDir == "" {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	name := filepath.Join(c.opts.NodeLogDir, fmt.Sprintf("seed-%d-node-%d.log", c.opts.Seed, id))
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func newCluster(opts Config, logf func(string, ...any)) (*cluster, error) {
	c := &cluster{opts: opts, net: newFaultyNet(opts.Seed), logf: logf}
	initial := map[uint64]string{}
	for i := 0; i < opts.Nodes; i++ {
		c.nextID++
		s := &slot{id: c.nextID, fs: vfs.NewCrashableMem()}
		cfg, err := c.baseConfig(s)
		if err != nil {
			return nil, err
		}
		s.cfg = cfg
		initial[s.id] = cfg.PeerAddr
		c.slots = append(c.slots, s)
	}
	for _, s := range c.slots {
		s.cfg.InitialCluster = initial
		if err := c.startSlot(s); err != nil {
			c.stopAll()
			return nil, err
		}
	}
	return c, nil
}

// startSlot starts the slot's node on its filesystem, retrying while the
// ports are briefly taken.
func (c *cluster) startSlot(s *slot) error {
	var err error
	for i := 0; i < 50; i++ {
		var n *server.Node
		if n, err = server.Start(s.cfg); err == nil {
			s.node = n
			s.dead.Store(false)
			c.watch(s, n)
			c.net.setDown(s.id, false)
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("start node %d: %w", s.id, err)
}

// crash kills the slot's node as a power cut would: it is cut off from the
// network first (so it acknowledges nothing after the cut), then its
// filesystem is replaced by a crash clone keeping keepPct % of the data it
// had not synced, then the old process is stopped.
func (c *cluster) crash(s *slot, keepPct int, rng *rand.Rand) {
	if s.node == nil {
		return
	}
	c.net.setDown(s.id, true)
	s.fs = s.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: keepPct, RNG: rng})
	old := s.node
	s.node = nil
	_ = old.Stop()
	s.cfg.FS = s.fs
}

// restart starts a crashed slot again on its crash-cloned filesystem.
func (c *cluster) restart(s *slot) error {
	if s.node != nil {
		return nil
	}
	c.snaps.Add(1)
	return c.startSlot(s)
}

func (c *cluster) stopAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.slots {
		if s.node != nil {
			_ = s.node.Stop()
			s.node = nil
		}
	}
}

// running returns the slots whose node is up.
func (c *cluster) running() []*slot {
	var out []*slot
	for _, s := range c.slots {
		if s.node != nil && !s.dead.Load() {
			out = append(out, s)
		}
	}
	return out
}

// leader returns the slot of the node that some running node reports as
// leader and that is itself running, or nil.
func (c *cluster) leader() *slot {
	for _, s := range c.running() {
		if l := s.node.Status().Leader; l != 0 {
			for _, t := range c.running() {
				if t.id == l {
					return t
				}
			}
		}
	}
	return nil
}

// clientAddrs are the RESP addresses of every slot's current node.
func (c *cluster) clientAddrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, s := range c.slots {
		out = append(out, s.cfg.ClientAddr)
	}
	return out
}

// replace puts a new node in slot s: the new node joins through a running
// member (it catches up by snapshot), then the old one is removed from the
// cluster and stopped.
func (c *cluster) replace(ctx context.Context, s *slot) error {
	var via *slot
	for _, t := range c.running() {
		if t != s {
			via = t
			break
		}
	}
	if via == nil {
		return errors.New("no running member to join through")
	}
	c.nextID++
	ns := &slot{id: c.nextID, fs: vfs.NewCrashableMem()}
	cfg, err := c.baseConfig(ns)
	if err != nil {
		return err
	}
	cfg.Join = via.cfg.PeerAddr
	ns.cfg = cfg
	// Join blocks until the cluster admits the node; bound it.
	done := make(chan error, 1)
	go func() { done <- c.startSlot(ns) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		err = <-done
	}
	if err != nil {
		return fmt.Errorf("join node %d: %w", ns.id, err)
	}
	c.snaps.Add(1)
	oldID, oldNode := s.id, s.node
	rmCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := ns.node.RemoveMember(rmCtx, oldID); err != nil {
		// The new node is a member now; keep both (the cluster has one
		// more voter) and report.
		c.slots = append(c.slots, ns)
		return fmt.Errorf("remove node %d: %w (node %d stays)", oldID, err, oldID)
	}
	if oldNode != nil {
		_ = oldNode.Stop()
	}
	c.net.setDown(oldID, true) // a removed node must not disturb the cluster
	s.id, s.cfg, s.fs, s.node = ns.id, ns.cfg, ns.fs, ns.node
	s.offset.Store(0)
	return nil
}

// members returns the ids of the voters and learners as the given node
// knows them.
func members(n *server.Node) map[uint64]bool {
	out := map[uint64]bool{}
	for _, m := range n.Status().Members {
		out[m.ID] = true
	}
	return out
}
