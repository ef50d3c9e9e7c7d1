package server

import (
	"strings"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/kvdiff"
)

// TestKeyspaceNotificationsBlockingAndMultiLikeRedis compares, live, the
// keyspace notifications of what testdata/notify's one-command-at-a-time
// files cannot hold with redis-server's: a blocking list pop served by a
// push from another client (the pop's events come from the apply of the
// pop, after the push's), and MULTI/EXEC blocks (whose events come at
// EXEC). Each step runs its commands on the command connection, with
// block, if set, sent first by another client and waited for until it is
// blocked; the step's events are read once that client was served.
func TestKeyspaceNotificationsBlockingAndMultiLikeRedis(t *testing.T) {
	if !kvdiff.HaveRedis() {
		t.Skip("redis-server is not installed")
	}
	type step struct {
		block []string
		cmds  [][]string
	}
	c := func(s string) []string { return strings.Fields(s) }
	scenarios := [][]step{
		{{block: c("BLPOP bl 0"), cmds: [][]string{c("LPUSH bl a")}}},
		{{block: c("BRPOP nothing bl 0"), cmds: [][]string{c("RPUSH bl a b")}}},
		{{block: c("BLMOVE src dst LEFT RIGHT 0"), cmds: [][]string{c("RPUSH src x")}}},
		{
			{cmds: [][]string{c("RPUSH dst y")}},
			{block: c("BRPOPLPUSH src dst 0"), cmds: [][]string{c("LPUSH src x")}},
		},
		{{block: c("BRPOPLPUSH rot rot 0"), cmds: [][]string{c("RPUSH rot a b")}}},
		{{block: c("BLMPOP 0 2 m1 m2 LEFT COUNT 3"), cmds: [][]string{c("RPUSH m2 a b")}}},
		{{block: c("BLPOP q 0"), cmds: [][]string{c("MULTI"), c("RPUSH q a"), c("RPUSH q b"), c("EXEC")}}},
		{
			{cmds: [][]string{c("MULTI"), c("LPUSH x a"), c("RPUSH x b c"), c("LMOVE x y LEFT LEFT"),
				c("RPOP x 5"), c("LPOP x"), c("HSET h f v g w"), c("HINCRBY h n 1"), c("HDEL h f g n"), c("EXEC")}},
			{cmds: [][]string{c("MULTI"), c("HSET s f v"), c("LPUSH s a"), c("HSETNX s f v"),
				c("LPUSHX nope a"), c("HDEL s f"), c("EXEC")}},
		},
	}
	ref := kvdiff.StartServer(t)
	cl := newTestCluster(t, 3)
	lead := cl.waitLeader()
	fs := followersOf(lead, 3)
	kvAddr := func(id uint64) string { return cl.node(id).ClientAddr() }
	sides := []struct {
		name      string
		ns        *notifySide
		blockAddr string
	}{
		{"redis-server", newNotifySide(t, ref, ref, ref), ref},
		{"kvorum", newNotifySide(t, kvAddr(fs[0]), kvAddr(fs[1]), kvAddr(lead)), kvAddr(fs[1])},
	}
	for i, sc := range scenarios {
		var got [2][]string
		for j, sd := range sides {
			sd.ns.reset(t)
			for _, st := range sc {
				var done chan string
				if st.block != nil {
					done = make(chan string, 1)
					bc, err := kvdiff.Dial(sd.blockAddr, 2)
					if err != nil {
						t.Fatal(err)
					}
					go func() {
						defer bc.Close()
						v, err := bc.Do(st.block...)
						if err != nil {
							done <- err.Error()
							return
						}
						done <- kvdiff.Render(v)
					}()
					waitBlocked(t, sd.blockAddr, "1")
				}
				var replies []string
				for _, cmd := range st.cmds {
					v, err := sd.ns.cmd.Do(cmd...)
					if err != nil {
						t.Fatalf("%s: %s: %v", sd.name, kvdiff.String(cmd), err)
					}
					replies = append(replies, kvdiff.Render(v))
				}
				if done != nil {
					select {
					case r := <-done:
						replies = append(replies, "blocked client: "+r)
					case <-time.After(20 * time.Second):
						t.Fatalf("%s: %s was not served", sd.name, kvdiff.String(st.block))
					}
					waitBlocked(t, sd.blockAddr, "0")
				}
				got[j] = append(got[j], strings.Join(replies, "\n")+"\nevents:\n"+sd.ns.events(t))
			}
		}
		for k := range got[0] {
			if got[0][k] != got[1][k] {
				t.Errorf("scenario %d, step %d:\nredis-server:\n%s\nkvorum:\n%s", i, k, got[0][k], got[1][k])
			}
		}
		if testing.Verbose() {
			t.Logf("scenario %d:\n%s", i, strings.Join(got[0], "\n"))
		}
	}
}

// waitBlocked waits until INFO clients of addr shows want blocked clients.
func waitBlocked(t *testing.T, addr, want string) {
	t.Helper()
	ic, err := kvdiff.Dial(addr, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer ic.Close()
	var got string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		v, err := ic.Do("INFO", "clients")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(v.Str), "\r\n") {
			if n, ok := strings.CutPrefix(line, "blocked_clients:"); ok {
				got = n
			}
		}
		if got == want {
			return
		}
	}
	t.Fatalf("%s: blocked_clients %s, want %s", addr, got, want)
}
