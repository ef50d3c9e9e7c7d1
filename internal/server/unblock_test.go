package server

import (
	"strings"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/kvdiff"
)

// TestClientUnblockLikeRedis: CLIENT UNBLOCK from another connection ends
// a blocked BLPOP, BLMPOP or XREAD BLOCK as redis-server does (TIMEOUT,
// the default, answers the command's timeout reply; ERROR answers
// UNBLOCKED), a second UNBLOCK answers 0, and the errors are Redis's.
// kvorum's side is a follower.
func TestClientUnblockLikeRedis(t *testing.T) {
	ref := kvdiff.StartServer(t)
	c := newTestCluster(t, 3)
	kv := c.node(followersOf(c.waitLeader(), 3)[0]).ClientAddr()
	dial := func(addr string) *kvdiff.Conn { return dialRESP2(t, addr) }
	do := func(cn *kvdiff.Conn, args ...string) string { return doRendered(t, cn, args...) }
	// unblocked runs cmd on a new connection to addr, unblocks it (with
	// mode, if any) from another, and returns the blocked command's
	// reply and the second UNBLOCK's.
	unblocked := func(addr string, mode string, cmd ...string) (reply, again string) {
		bc, oc := dial(addr), dial(addr)
		id := do(bc, "CLIENT", "ID")[len("(integer) "):]
		done := make(chan string, 1)
		go func() {
			v, err := bc.Do(cmd...)
			if err != nil {
				done <- err.Error()
				return
			}
			done <- kvdiff.Render(v)
		}()
		args := []string{"CLIENT", "UNBLOCK", id}
		if mode != "" {
			args = append(args, mode)
		}
		// 0 until the command waits: the client is not blocked yet.
		for deadline := time.Now().Add(10 * time.Second); do(oc, args...) != "(integer) 1"; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v never blocked", addr, cmd)
			}
		}
		select {
		case reply = <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: %v still blocked after CLIENT UNBLOCK %s", addr, cmd, mode)
		}
		return reply, do(oc, args...)
	}
	for _, mode := range []string{"", "TIMEOUT", "ERROR", "error"} {
		for _, cmd := range [][]string{
			{"BLPOP", "unblock-list", "0"},
			{"BLMPOP", "0", "1", "unblock-list", "LEFT"},
			{"XREAD", "BLOCK", "0", "STREAMS", "unblock-stream", "$"},
		} {
			wantReply, wantAgain := unblocked(ref, mode, cmd...)
			gotReply, gotAgain := unblocked(kv, mode, cmd...)
			if gotReply != wantReply || gotAgain != wantAgain {
				t.Errorf("CLIENT UNBLOCK %s of %v: kvorum %q then %q, redis-server %q then %q",
					mode, cmd, gotReply, gotAgain, wantReply, wantAgain)
			}
		}
	}
	rc, kc := dial(ref), dial(kv)
	for _, args := range [][]string{
		{"CLIENT", "UNBLOCK", "999999"}, {"CLIENT", "UNBLOCK", "abc"}, {"CLIENT", "UNBLOCK", "1", "FOO"},
		{"CLIENT", "UNBLOCK"}, {"CLIENT", "UNBLOCK", "1", "ERROR", "x"},
	} {
		if got, want := do(kc, args...), do(rc, args...); got != want {
			t.Errorf("%v: kvorum %q, redis-server %q", args, got, want)
		}
	}
}

// TestClientUnblockLockAcquire: CLIENT UNBLOCK ends a LOCK ACQUIRE that
// waits in the queue: TIMEOUT as its own timeout would (null, the waiter
// leaves the queue), ERROR with UNBLOCKED (it leaves the queue too).
func TestClientUnblockLockAcquire(t *testing.T) {
	c := newTestCluster(t, 3)
	addr := c.node(followersOf(c.waitLeader(), 3)[0]).ClientAddr()
	dial := func() *kvdiff.Conn { return dialRESP2(t, addr) }
	do := func(cn *kvdiff.Conn, args ...string) string { return doRendered(t, cn, args...) }
	hc := dial()
	holder := do(hc, "LEASE", "GRANT", "60000")[len("(integer) "):]
	if r := do(hc, "LOCK", "ACQUIRE", "unblock-lock", holder); r[:len("(integer)")] != "(integer)" {
		t.Fatalf("the holder's acquire: %s", r)
	}
	for _, tc := range []struct{ mode, want string }{{"TIMEOUT", "(nil)"}, {"ERROR", "(error) UNBLOCKED client unblocked via CLIENT UNBLOCK"}} {
		wc, oc := dial(), dial()
		waiter := do(wc, "LEASE", "GRANT", "60000")[len("(integer) "):]
		id := do(wc, "CLIENT", "ID")[len("(integer) "):]
		done := make(chan string, 1)
		go func() {
			v, err := wc.Do("LOCK", "ACQUIRE", "unblock-lock", waiter)
			if err != nil {
				done <- err.Error()
				return
			}
			done <- kvdiff.Render(v)
		}()
		for deadline := time.Now().Add(10 * time.Second); do(oc, "CLIENT", "UNBLOCK", id, tc.mode) != "(integer) 1"; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("LOCK ACQUIRE never blocked")
			}
		}
		select {
		case got := <-done:
			if got != tc.want {
				t.Errorf("CLIENT UNBLOCK %s of a queued LOCK ACQUIRE: %q, want %q", tc.mode, got, tc.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("LOCK ACQUIRE still waiting after CLIENT UNBLOCK %s", tc.mode)
		}
		// The waiter left the queue: the lock has no waiters.
		deadline := time.Now().Add(10 * time.Second)
		for lockWaiters(do(oc, "LOCK", "INFO", "unblock-lock")) != "0" {
			if time.Now().After(deadline) {
				t.Fatalf("after CLIENT UNBLOCK %s the waiter is still queued: %s", tc.mode, do(oc, "LOCK", "INFO", "unblock-lock"))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// lockWaiters is the waiter count in a RESP2 rendering of LOCK INFO ("" if
// none is there).
func lockWaiters(info string) string {
	lines := strings.Split(info, "\n")
	for i, l := range lines {
		if strings.HasSuffix(l, `"waiters"`) && i+1 < len(lines) {
			_, n, _ := strings.Cut(lines[i+1], "(integer) ")
			return n
		}
	}
	return ""
}

// dialRESP2 opens a RESP2 connection to addr, closed when the test ends.
func dialRESP2(t *testing.T, addr string) *kvdiff.Conn {
	t.Helper()
	cn, err := kvdiff.Dial(addr, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cn.Close() })
	return cn
}

// doRendered runs args on cn and returns the reply as redis-cli shows it.
func doRendered(t *testing.T, cn *kvdiff.Conn, args ...string) string {
	t.Helper()
	v, err := cn.Do(args...)
	if err != nil {
		t.Fatal(err)
	}
	return kvdiff.Render(v)
}
