package server

import (
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvorum/kvorum/internal/kv"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/storage"
)

// Per-range copies of the cluster parameters (configcopy.go) on 3-node
// clusters split into testRangeCount ranges.

// rangeHash hashes range rg's replicated state on node n (its range-local
// keys and its slots' keys, as its snapshots carry them) with the range's
// applied index, read from one snapshot of the node's store.
func rangeHash(t *testing.T, n *Node, rg storage.RangeID) (applied uint64, sum [32]byte, keys int) {
	t.Helper()
	snap := n.store.DB().NewSnapshot()
	defer snap.Close()
	st, err := storage.LoadAppliedState(snap, rg)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	err = storage.EmitRange(snap, n.store.Replica(rg).Descriptor(), (*kvMachine)(nil).Span, func(k, v []byte) error {
		fmt.Fprintf(h, "%d:%x=%d:%x\n", len(k), k, len(v), v)
		keys++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	copy(sum[:], h.Sum(nil))
	return st.Index, sum, keys
}

// rangesConverge waits until each range has the same applied index on
// the 3 nodes and then requires the same bytes.
func rangesConverge(t *testing.T, c *testCluster) {
	t.Helper()
	for rg := storage.RangeID(1); rg <= testRangeCount; rg++ {
		deadline := time.Now().Add(20 * time.Second)
		for {
			var a [3]uint64
			var s [3][32]byte
			var k [3]int
			for i := range 3 {
				a[i], s[i], k[i] = rangeHash(t, c.node(uint64(i+1)), rg)
			}
			if a[0] == a[1] && a[1] == a[2] {
				for i := 1; i < 3; i++ {
					if s[i] != s[0] {
						t.Fatalf("range %d: node %d differs from node 1 at applied index %d: %x (%d keys) vs %x (%d keys)", rg, i+1, a[0], s[i][:8], k[i], s[0][:8], k[0])
					}
				}
				t.Logf("range %d: 3 replicas identical at applied index %d, %d keys", rg, a[0], k[0])
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("range %d: applied indexes never became equal: %v", rg, a)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestRangesConfigSetReachesEveryRange: after CONFIG SET
// hash-max-listpack-entries 4 has replied, a hash of 5 fields is a
// hashtable and one of 3 a listpack in every range, read on every node;
// and every range's copy carries the SET's version on every node.
func TestRangesConfigSetReachesEveryRange(t *testing.T) {
	c := newRangeCluster(t, testRangeCount)
	ctx := testCtx(t, time.Minute)
	cls := []*redis.Client{c.client(1), c.client(2), c.client(3)}
	if err := cls[1].ConfigSet(ctx, "hash-max-listpack-entries", "4").Err(); err != nil {
		t.Fatal(err)
	}
	for rg := storage.RangeID(1); rg <= testRangeCount; rg++ {
		big, small := keyIn("big:", rg, 0), keyIn("small:", rg, 0)
		cl := cls[int(rg)%3]
		if err := cl.HSet(ctx, big, "a", 1, "b", 2, "c", 3, "d", 4, "e", 5).Err(); err != nil {
			t.Fatal(err)
		}
		if err := cl.HSet(ctx, small, "a", 1, "b", 2, "c", 3).Err(); err != nil {
			t.Fatal(err)
		}
		for i, r := range cls {
			for k, want := range map[string]string{big: "hashtable", small: "listpack"} {
				if got, err := r.ObjectEncoding(ctx, k).Result(); err != nil || got != want {
					t.Fatalf("node %d, range %d: OBJECT ENCODING %s = %q, %v; want %s", i+1, rg, k, got, err, want)
				}
			}
		}
	}
	_, want, err := c.node(1).readCopy(copiers[0])
	if err != nil || want == 0 {
		t.Fatalf("range 1's version %d, %v", want, err)
	}
	for id := uint64(1); id <= 3; id++ {
		for rg := storage.RangeID(2); rg <= testRangeCount; rg++ {
			deadline := time.Now().Add(10 * time.Second)
			for {
				v, ok, err := kv.ConfigCopyVersion(c.node(id).store.DB(), rg)
				if err != nil {
					t.Fatal(err)
				}
				if ok && v == want {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("node %d, range %d: copy version %d (%v), want %d", id, rg, v, ok, want)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}

// TestRangesConfigCopyDeterministic: CONFIG SETs toggling the hash and
// zset thresholds between 4 and 8, from every node, while every node
// pipelines new 5-element hashes and zsets into every range (so each
// one's encoding is the threshold its range applied it with); then each
// range's bytes are the same on the 3 nodes. (With one Settings for every
// range, as before the copies, a replica of range R encoded an entry with
// whatever range 1 had applied on its node at that moment.)
func TestRangesConfigCopyDeterministic(t *testing.T) {
	c := newRangeCluster(t, testRangeCount)
	ctx := testCtx(t, 2*time.Minute)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	stop := make(chan struct{})
	for w := 1; w <= 3; w++ {
		cl := c.client(uint64(w))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				pipe := cl.Pipeline()
				for rg := storage.RangeID(1); rg <= testRangeCount; rg++ {
					for j := 0; j < 3; j++ {
						h, z := keyIn(fmt.Sprintf("h%d:%d:", w, i), rg, j), keyIn(fmt.Sprintf("z%d:%d:", w, i), rg, j)
						pipe.HSet(ctx, h, "a", 1, "b", 2, "c", 3, "d", 4, "e", 5)
						pipe.ZAdd(ctx, z, redis.Z{Score: 1, Member: "a"}, redis.Z{Score: 2, Member: "b"}, redis.Z{Score: 3, Member: "c"},
							redis.Z{Score: 4, Member: "d"}, redis.Z{Score: 5, Member: "e"})
					}
				}
				// The writes are load; under the race detector on two
				// cores one may time out (UNCERTAIN) or meet an election
				// (CLUSTERDOWN, TRYAGAIN): that changes nothing the test
				// checks, which is that the ranges converge.
				if _, err := pipe.Exec(ctx); err != nil && !transientErr(err) {
					errs <- err
					return
				}
			}
		}()
	}
	for i := 0; i < 30; i++ {
		cl := c.client(uint64(i%3) + 1)
		v := strconv.Itoa(4 + 4*(i%2))
		for _, p := range []string{"hash-max-listpack-entries", "zset-max-listpack-entries"} {
			// Under this load (the race detector) a copy may time out: the
			// SET then answers so, and the config queue delivers the copy
			// later; the ranges must converge all the same.
			if err := cl.ConfigSet(ctx, p, v).Err(); err != nil && !strings.Contains(err.Error(), "retried in the background") && !transientErr(err) {
				t.Fatal(err)
			} else if err != nil {
				t.Logf("CONFIG SET %s %s: %v", p, v, err)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	rangesConverge(t, c)
}

// TestRangesConfigQueueCopies: a KVORUM.CONFIG SET proposed to range 1
// alone (as if the node that ran it stopped before copying it) reaches
// every other range through range 1 leader's config queue.
func TestRangesConfigQueueCopies(t *testing.T) {
	c := newRangeCluster(t, testRangeCount)
	ctx := testCtx(t, time.Minute)
	n := c.node(1)
	out := make([]reply.Reply, 1)
	n.execWriteOn(ctx, n.store.Replica(firstRange), [][][]byte{{[]byte("KVORUM.CONFIG"), []byte("SET"), []byte("set-max-intset-entries"), []byte("3")}}, out)
	if out[0].Kind == reply.KindError {
		t.Fatal(string(out[0].Str))
	}
	deadline := time.Now().Add(10 * configCopyTick)
	for rg := storage.RangeID(2); rg <= testRangeCount; rg++ {
		k := keyIn("s:", rg, 0)
		cl := c.client(uint64(rg%3) + 1)
		for {
			if err := cl.Del(ctx, k).Err(); err != nil {
				t.Fatal(err)
			}
			if err := cl.SAdd(ctx, k, 1, 2, 3, 4).Err(); err != nil {
				t.Fatal(err)
			}
			enc, err := cl.ObjectEncoding(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if enc == "hashtable" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("range %d: a set of 4 integers is still %s", rg, enc)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	rangesConverge(t, c)
}

// TestRangesFunctionCopies: after FUNCTION LOAD has replied, FCALL and
// FCALL_RO work in every range through every node; after FUNCTION DELETE
// has replied, they fail in every range; each range's bytes end the same
// on the 3 nodes.
func TestRangesFunctionCopies(t *testing.T) {
	c := newRangeCluster(t, testRangeCount)
	ctx := testCtx(t, time.Minute)
	cls := []*redis.Client{c.client(1), c.client(2), c.client(3)}
	const lib = "#!lua name=rlib\n" +
		"redis.register_function('rset', function(keys, args) return redis.call('SET', keys[1], args[1]) end)\n" +
		"redis.register_function{function_name='rget', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}}"
	if err := cls[2].FunctionLoad(ctx, lib).Err(); err != nil {
		t.Fatal(err)
	}
	for rg := storage.RangeID(1); rg <= testRangeCount; rg++ {
		k := keyIn("fn:", rg, 0)
		if err := cls[int(rg)%3].FCall(ctx, "rset", []string{k}, "v"+strconv.Itoa(int(rg))).Err(); err != nil {
			t.Fatalf("range %d: FCALL: %v", rg, err)
		}
		for i, cl := range cls {
			if got, err := cl.FCallRO(ctx, "rget", []string{k}).Text(); err != nil || got != "v"+strconv.Itoa(int(rg)) {
				t.Fatalf("node %d, range %d: FCALL_RO = %q, %v", i+1, rg, got, err)
			}
		}
	}
	if err := cls[0].FunctionDelete(ctx, "rlib").Err(); err != nil {
		t.Fatal(err)
	}
	for rg := storage.RangeID(1); rg <= testRangeCount; rg++ {
		k := keyIn("fn:", rg, 0)
		for i, cl := range cls {
			if err := cl.FCallRO(ctx, "rget", []string{k}).Err(); err == nil || !strings.Contains(err.Error(), "Function not found") {
				t.Fatalf("node %d, range %d: FCALL_RO after FUNCTION DELETE: %v", i+1, rg, err)
			}
		}
	}
	rangesConverge(t, c)
}

// TestRangesConfigCopyNotAsUser: a user allowed CONFIG SET and a few
// commands, nothing internal, gets OK, and the copies the node proposes
// on its behalf (KVORUM.CONFIGCOPY, never wrapped for the user's ACL
// check) reach every range.
func TestRangesConfigCopyNotAsUser(t *testing.T) {
	c := newRangeCluster(t, testRangeCount)
	ctx := testCtx(t, time.Minute)
	if err := c.client(1).Do(ctx, "ACL", "SETUSER", "ops", "on", ">pw", "~*", "+config", "+hset", "+object", "+ping", "+hello", "+info").Err(); err != nil {
		t.Fatal(err)
	}
	cl := redis.NewClient(&redis.Options{Addr: c.node(2).ClientAddr(), Username: "ops", Password: "pw", Protocol: 2})
	t.Cleanup(func() { cl.Close() })
	if err := cl.ConfigSet(ctx, "hash-max-listpack-entries", "2").Err(); err != nil {
		t.Fatal(err)
	}
	for rg := storage.RangeID(1); rg <= testRangeCount; rg++ {
		k := keyIn("u:", rg, 0)
		if err := cl.HSet(ctx, k, "a", 1, "b", 2, "c", 3).Err(); err != nil {
			t.Fatal(err)
		}
		if got, err := cl.ObjectEncoding(ctx, k).Result(); err != nil || got != "hashtable" {
			t.Fatalf("range %d: OBJECT ENCODING %q, %v", rg, got, err)
		}
	}
}

// transientErr reports whether err is a reply a client retries: the
// outcome unknown after the request timeout, no leader reachable, or a
// range changing.
func transientErr(err error) bool {
	for _, p := range []string{"UNCERTAIN", "CLUSTERDOWN", "TRYAGAIN"} {
		if strings.HasPrefix(err.Error(), p) {
			return true
		}
	}
	return false
}
