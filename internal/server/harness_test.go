package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/redis/go-redis/v9"

	"github.com/kvorum/kvorum/internal/testport"
	"github.com/kvorum/kvorum/internal/transport"
)

// testCluster runs N nodes in this process on 127.0.0.1 with in-memory
// filesystems and one Partitioner shared by every node's transport, so a
// test can cut links, crash (Stop) and restart nodes with their state.
type testCluster struct {
	t     testing.TB
	net   *transport.Partitioner
	mu    sync.Mutex
	nodes map[uint64]*Node
	cfgs  map[uint64]Config
}

func init() {
	// go-redis logs every failed dial; the tests kill nodes on purpose.
	redis.SetLogger(quietLogger{})
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...interface{}) {}

func freeAddr(t testing.TB) string {
	t.Helper()
	addr, err := testport.Addr() // not ephemeral: a restarted node gets its port back
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func nodeConfig(t testing.TB, id uint64, p *transport.Partitioner) Config {
	return Config{
		ID:                id,
		DataDir:           fmt.Sprintf("/node-%d", id),
		FS:                vfs.NewMem(),
		ClientAddr:        freeAddr(t),
		PeerAddr:          freeAddr(t),
		AdminAddr:         "-",
		TickInterval:      20 * time.Millisecond,
		ElectionTicks:     10,
		HeartbeatTicks:    1,
		SnapshotThreshold: 50,
		RequestTimeout:    3 * time.Second,
		LeaseReads:        true, // as `kvorum start` by default
		PeerInterceptor:   p,
		Logger:            testLogger(),
	}
}

func newTestCluster(t testing.TB, n int) *testCluster {
	t.Helper()
	return newClusterWith(t, n, func(uint64, *Config) {})
}

func (c *testCluster) start(id uint64) *Node {
	c.t.Helper()
	var node *Node
	var err error
	// Ports picked by freeAddr may be briefly taken; retry a little.
	for i := 0; i < 20; i++ {
		if node, err = Start(c.cfgs[id]); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		c.t.Fatalf("start node %d: %v", id, err)
	}
	c.mu.Lock()
	c.nodes[id] = node
	c.mu.Unlock()
	return node
}

func (c *testCluster) stop(id uint64) {
	c.mu.Lock()
	n := c.nodes[id]
	delete(c.nodes, id)
	c.mu.Unlock()
	if n != nil {
		if err := n.Stop(); err != nil {
			c.t.Errorf("stop node %d: %v", id, err)
		}
	}
}

func (c *testCluster) stopAll() {
	c.mu.Lock()
	ids := make([]uint64, 0, len(c.nodes))
	for id := range c.nodes {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	for _, id := range ids {
		c.stop(id)
	}
}

func (c *testCluster) node(id uint64) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[id]
}

// waitLeader waits until every running node knows the same leader and
// returns it.
func (c *testCluster) waitLeader() uint64 {
	c.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		var lead uint64
		agree := true
		for _, n := range c.nodes {
			l := n.Status().Leader
			if l == 0 || (lead != 0 && l != lead) {
				agree = false
			}
			lead = l
		}
		_, running := c.nodes[lead]
		c.mu.Unlock()
		if agree && lead != 0 && running {
			return lead
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatal("no leader agreed on within 15s")
	return 0
}

// client returns a client of node id. Every connection it opens first
// checks, with INFO server, that it reached node id of this test process:
// once the node stops, its port (picked by freeAddr) is free for anyone,
// and a test binary running alongside (go test runs packages in parallel)
// took it, so that a test's writes to a stopped node were acknowledged by
// another process's server and then "lost" (found with
// TestClusterLeaderCrashLosesNoAcknowledgedWrite next to the torture
// package: every missing write had been acknowledged 0.1-0.9 s after its
// node stopped).
func (c *testCluster) client(id uint64) *redis.Client {
	addr := c.node(id).ClientAddr()
	want := fmt.Sprintf("process_id:%d\r\n", os.Getpid())
	wantNode := fmt.Sprintf("kvorum_node_id:%d\r\n", id)
	cl := redis.NewClient(&redis.Options{
		Addr: addr, Protocol: 2, MaxRetries: -1,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
		OnConnect: func(ctx context.Context, cn *redis.Conn) error {
			info, err := cn.Info(ctx, "server").Result()
			if err != nil {
				return err
			}
			if !strings.Contains(info, want) || !strings.Contains(info, wantNode) {
				return fmt.Errorf("test client of node %d: %s is another server now (its port was reused)", id, addr)
			}
			return nil
		},
	})
	c.t.Cleanup(func() { cl.Close() })
	return cl
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
