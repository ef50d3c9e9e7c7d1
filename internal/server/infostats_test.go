package server

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/kvdiff"
)

// infoStatsSequence is what TestInfoStatsLikeRedis runs on both sides
// after CONFIG RESETSTAT: executed, failed (an error answered by the
// command) and rejected (wrong arity, unknown subcommand: refused before
// it runs) calls of data and connection commands.
var infoStatsSequence = [][]string{
	{"SET", "a", "1"}, {"SET", "b", "2"}, {"GET", "a"},
	{"LPUSH", "a", "x"},          // WRONGTYPE: failed
	{"GET"},                      // wrong arity: rejected
	{"INCR", "a"}, {"INCR", "b"}, // executed
	{"HSET", "h", "f"},    // wrong arity: rejected
	{"CLIENT", "NO-SUCH"}, // unknown subcommand: rejected
	{"CLIENT", "ID"},      // a subcommand, counted as client|id
	{"PING"}, {"PING"}, {"ECHO", "x"},
}

// TestInfoStatsLikeRedis: INFO commandstats and errorstats count the
// same calls, failures and rejections as redis-server does for the same
// commands (through a follower: the counts are the receiving node's), and
// CONFIG RESETSTAT zeroes them. Times (usec) are not compared.
func TestInfoStatsLikeRedis(t *testing.T) {
	ref := kvdiff.StartReference(t)
	c := newTestCluster(t, 3)
	lead := c.waitLeader()
	kc, err := kvdiff.Dial(c.node(followersOf(lead, 3)[0]).ClientAddr(), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	run := func(do func(args ...string) (kvdiff.Value, error)) (cmdstats, errstats map[string]string) {
		for _, args := range append([][]string{{"CONFIG", "RESETSTAT"}}, infoStatsSequence...) {
			if _, err := do(args...); err != nil {
				t.Fatal(err)
			}
		}
		parse := func(section string) map[string]string {
			v, err := do("INFO", section)
			if err != nil {
				t.Fatal(err)
			}
			m := map[string]string{}
			for _, line := range strings.Split(string(v.Str), "\r\n") {
				k, val, ok := strings.Cut(line, ":")
				if !ok || strings.HasPrefix(line, "#") {
					continue
				}
				// calls=..,usec=..,usec_per_call=..,rejected_calls=..,failed_calls=..:
				// keep the counts only.
				var keep []string
				for _, kv := range strings.Split(val, ",") {
					if !strings.HasPrefix(kv, "usec") {
						keep = append(keep, kv)
					}
				}
				m[k] = strings.Join(keep, ",")
			}
			return m
		}
		return parse("commandstats"), parse("errorstats")
	}
	refDo := func(args ...string) (kvdiff.Value, error) {
		v, _, err := ref.Do(args...)
		return v, err
	}
	wantCmd, wantErr := run(refDo)
	gotCmd, gotErr := run(kc.Do)
	// INFO is counted once it has answered: the first INFO (commandstats)
	// is in the second (errorstats) only, on both sides alike.
	for k, want := range wantCmd {
		if got := gotCmd[k]; got != want {
			t.Errorf("commandstats %s: kvorum %q, redis-server %q", k, got, want)
		}
	}
	for k, got := range gotCmd {
		if _, ok := wantCmd[k]; !ok {
			t.Errorf("commandstats %s: kvorum %q, redis-server has no such line", k, got)
		}
	}
	if len(wantErr) == 0 || strings.Join(fmtMap(gotErr), " ") != strings.Join(fmtMap(wantErr), " ") {
		t.Errorf("errorstats: kvorum %v, redis-server %v", fmtMap(gotErr), fmtMap(wantErr))
	}
	if len(wantCmd) < 8 {
		t.Fatalf("redis-server's commandstats has %d lines: the sequence did not run", len(wantCmd))
	}
}

func fmtMap(m map[string]string) []string {
	var s []string
	for k, v := range m {
		s = append(s, k+"="+v)
	}
	slices.Sort(s)
	return s
}

// TestInfoSectionsLikeRedis: INFO with no argument, default, all,
// everything and a section name answers the sections redis-server 7.0
// answers, in its order (Latencystats with all and everything, as Redis).
func TestInfoSectionsLikeRedis(t *testing.T) {
	ref := kvdiff.StartReference(t)
	c := newTestCluster(t, 3)
	kc, err := kvdiff.Dial(c.node(c.waitLeader()).ClientAddr(), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	headers := func(v kvdiff.Value) []string {
		var h []string
		for _, line := range strings.Split(string(v.Str), "\r\n") {
			if name, ok := strings.CutPrefix(line, "# "); ok {
				h = append(h, name)
			}
		}
		return h
	}
	for _, args := range [][]string{{"INFO"}, {"INFO", "default"}, {"INFO", "all"}, {"INFO", "everything"},
		{"INFO", "commandstats"}, {"INFO", "cpu", "errorstats"}, {"INFO", "keyspace", "server"},
		{"INFO", "latencystats"}, {"INFO", "default", "latencystats"}} {
		want, _, err := ref.Do(args...)
		if err != nil {
			t.Fatal(err)
		}
		got, err := kc.Do(args...)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := strings.Join(headers(got), ","), strings.Join(headers(want), ","); g != w {
			t.Errorf("%v: kvorum's sections %s, redis-server's %s", args, g, w)
		}
	}
}

// TestInfoBlockedClientsLikeRedis: INFO clients counts a client blocked
// in BLPOP while it waits (blocked_clients), and in clients_in_timeout_table
// too if its wait has a timeout, and neither once it was served, on kvorum
// (the node the client is connected to) as on redis-server.
func TestInfoBlockedClientsLikeRedis(t *testing.T) {
	ref := kvdiff.StartServer(t)
	c := newTestCluster(t, 3)
	kv := c.node(followersOf(c.waitLeader(), 3)[0]).ClientAddr()
	for _, addr := range []string{ref, kv} {
		field := func(name string) string {
			ic, err := kvdiff.Dial(addr, 2)
			if err != nil {
				t.Fatal(err)
			}
			defer ic.Close()
			v, err := ic.Do("INFO", "clients")
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(string(v.Str), "\r\n") {
				if n, ok := strings.CutPrefix(line, name+":"); ok {
					return n
				}
			}
			t.Fatalf("%s: no %s in %q", addr, name, v.Str)
			return ""
		}
		state := func() string { return field("blocked_clients") + "/" + field("clients_in_timeout_table") }
		waitFor := func(want string) {
			deadline := time.Now().Add(10 * time.Second)
			for state() != want {
				if time.Now().After(deadline) {
					t.Fatalf("%s: blocked_clients/clients_in_timeout_table %s, want %s", addr, state(), want)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		if got := state(); got != "0/0" {
			t.Fatalf("%s: blocked_clients/clients_in_timeout_table %s before any BLPOP", addr, got)
		}
		for _, tc := range []struct{ timeout, want string }{{"0", "1/0"}, {"30", "1/1"}} {
			bc, err := kvdiff.Dial(addr, 2)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := bc.Do("BLPOP", "blocked-list", tc.timeout)
				done <- err
			}()
			waitFor(tc.want)
			pc, err := kvdiff.Dial(addr, 2)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pc.Do("RPUSH", "blocked-list", "x"); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			waitFor("0/0")
			pc.Close()
			bc.Close()
		}
	}
}
