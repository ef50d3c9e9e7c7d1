package server

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/kvdiff"
	"github.com/kvorum/kvorum/internal/script"
)

// The BUSY reply, SCRIPT KILL and FUNCTION KILL (resp/busy.go,
// script.Monitor). The scripts loop storing into a table: on kvorum such
// a loop ends with the instruction budget after about 0.4 s on an idle
// machine (longer on a loaded one), on redis-server it runs until killed.
// Nothing is timed: a test polls until the node answers BUSY, and an
// attempt whose script ended before it was killed (a fast machine) is
// repeated.

const spinLoop = "local t = {} local i = 0 while true do i = i + 1 t[i % 64 + 1] = i end"

var spinLibrary = "#!lua name=spinlib\nredis.register_function{function_name='spin', callback=function() " +
	spinLoop + " end, flags={'no-writes'}}"

// busyTranscript runs start (a script that loops) on one connection to
// addr and, from a second connection, polls PING until it answers BUSY,
// then sends probes, then kill. It returns what the probes, the kill and
// the script answered, as redis-cli shows them, one per line, and
// whether the script was still running when killed (false: the attempt
// says nothing, repeat it).
func busyTranscript(t *testing.T, addr string, start []string, probes [][]string, kill []string) (string, bool) {
	t.Helper()
	a, b := dialRESP2(t, addr), dialRESP2(t, addr)
	if got := doRendered(t, b, "CONFIG", "SET", "busy-reply-threshold", "20"); got != "OK" {
		t.Fatalf("CONFIG SET busy-reply-threshold: %s", got)
	}
	done := make(chan string, 1)
	go func() {
		v, err := a.Do(start...)
		if err != nil {
			done <- "connection error: " + err.Error()
			return
		}
		done <- kvdiff.Render(v)
	}()
	var lines []string
	for {
		select {
		case <-done:
			return "", false // ended before this connection saw BUSY
		default:
		}
		if r := doRendered(t, b, "PING"); strings.HasPrefix(r, "(error) BUSY ") {
			lines = append(lines, "PING: "+r)
			break
		} else if r != "PONG" {
			t.Fatalf("PING: %s", r)
		}
	}
	for _, p := range probes {
		lines = append(lines, strings.Join(p, " ")+": "+doRendered(t, b, p...))
	}
	r := doRendered(t, b, kill...)
	if strings.Contains(r, "NOTBUSY") {
		<-done
		return "", false
	}
	lines = append(lines, strings.Join(kill, " ")+": "+r)
	lines = append(lines, "script: "+<-done)
	// A node that is not the leader may still be applying a script whose
	// reply came from the leader's run: wait for its run to end.
	after := doRendered(t, b, "SCRIPT", "KILL")
	for deadline := time.Now().Add(time.Minute); strings.Contains(after, "UNKILLABLE") && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		after = doRendered(t, b, "SCRIPT", "KILL")
	}
	lines = append(lines, "after: "+after+" "+doRendered(t, b, "PING"))
	doRendered(t, b, "CONFIG", "SET", "busy-reply-threshold", "5000")
	return strings.Join(lines, "\n"), true
}

// busyRepeated is busyTranscript, repeated until an attempt kills the
// running script (at most 5 attempts).
func busyRepeated(t *testing.T, addr string, start []string, probes [][]string, kill []string) string {
	t.Helper()
	for range 5 {
		if s, ok := busyTranscript(t, addr, start, probes, kill); ok {
			return s
		}
	}
	t.Fatalf("%s on %s: the script always ended before it was killed", start[0], addr)
	return ""
}

var durationMs = regexp.MustCompile(`"duration_ms"\n( *)\d+\) \(integer\) \d+`)

// TestScriptBusyAndKillLikeRedis: while a read-only script or function
// runs past busy-reply-threshold, a kvorum node answers what redis-server
// answers, to the byte: BUSY to ordinary commands, the other kind's BUSY
// to the wrong KILL, FUNCTION STATS, then OK to the right KILL, the
// killed script's error, and NOTBUSY afterwards.
func TestScriptBusyAndKillLikeRedis(t *testing.T) {
	ref := kvdiff.StartServer(t)
	c := newTestCluster(t, 3)
	node := c.node(followersOf(c.waitLeader(), 3)[0]).ClientAddr()
	for _, addr := range []string{ref, node} {
		cn := dialRESP2(t, addr)
		if r := doRendered(t, cn, "FUNCTION", "LOAD", "REPLACE", spinLibrary); r != `"spinlib"` {
			t.Fatalf("FUNCTION LOAD on %s: %s", addr, r)
		}
	}
	cases := []struct {
		name   string
		start  []string
		probes [][]string
		kill   []string
	}{
		{"EVAL_RO", []string{"EVAL_RO", spinLoop, "0"},
			[][]string{{"GET", "x"}, {"EXEC"}, {"FUNCTION", "KILL"}, {"FUNCTION", "STATS"}, {"NOSUCHCOMMAND"}},
			[]string{"SCRIPT", "KILL"}},
		{"EVAL_RO no-writes", []string{"EVAL_RO", "#!lua flags=no-writes\n" + spinLoop, "0"},
			[][]string{{"SET", "x", "1"}},
			[]string{"SCRIPT", "KILL"}},
		{"FCALL_RO", []string{"FCALL_RO", "spin", "0"},
			[][]string{{"GET", "x"}, {"SCRIPT", "KILL"}, {"FUNCTION", "STATS"}},
			[]string{"FUNCTION", "KILL"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := busyRepeated(t, ref, tc.start, tc.probes, tc.kill)
			got := busyRepeated(t, node, tc.start, tc.probes, tc.kill)
			want = durationMs.ReplaceAllString(want, `"duration_ms"`+"\n$1(duration)")
			got = durationMs.ReplaceAllString(got, `"duration_ms"`+"\n$1(duration)")
			if got != want {
				t.Errorf("kvorum:\n%s\nredis-server:\n%s", got, want)
			}
		})
	}
}

// TestScriptAtApplyUnkillable: a script that writes runs at apply time on
// every replica; SCRIPT KILL and FUNCTION KILL answer UNKILLABLE, saying
// why, and the script ends with its budget. A no-writes script at apply
// time can be killed: on the leader, whose run answers the client.
func TestScriptAtApplyUnkillable(t *testing.T) {
	// Three replicas run the script at once on a machine that may have two
	// cores and other work: the client waits as long as it takes.
	c := newClusterWith(t, 3, func(_ uint64, cfg *Config) { cfg.RequestTimeout = time.Minute })
	lead := c.node(c.waitLeader()).ClientAddr()
	// About 5 million instructions, within the budget.
	write := []string{"EVAL", "redis.call('SET', KEYS[1], 'v') local t = {} for i = 1, 1000000 do t[i % 64 + 1] = i end return 'done'", "1", "x"}
	probes := [][]string{{"GET", "x"}, {"FUNCTION", "KILL"}}
	got := busyRepeated(t, lead, write, probes, []string{"SCRIPT", "KILL"})
	unkillable := "(error) UNKILLABLE The busy script runs at apply time, on every replica of the cluster: " +
		"stopping it on one node would make the replicas diverge. It ends within its budget of 15000000 Lua instructions."
	want := []string{
		"PING: (error) BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
		"GET x: (error) BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
		"FUNCTION KILL: " + unkillable,
		"SCRIPT KILL: " + unkillable,
		`script: "done"`,
		"after: (error) NOTBUSY No scripts in execution right now. PONG",
	}
	if got != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	cn := dialRESP2(t, lead)
	if r := doRendered(t, cn, "GET", "x"); r != `"v"` {
		t.Errorf("GET x after the script: %s (its write stays, as in Redis)", r)
	}

	// Every replica runs it, and any of them may be the leader whose run
	// answers the client (a run at apply time that long can cost the
	// leader its leadership on a loaded machine): SCRIPT KILL goes to
	// every node, as a cluster client sends it.
	src := "#!lua flags=no-writes\n" + spinLoop
	for range 5 {
		if got, ok := killEverywhere(t, c, lead, src); ok {
			want := "(error) ERR Script killed by user with SCRIPT KILL... script: " + script.SHA1Hex([]byte(src)) + ", on @user_script:2."
			if got != want {
				t.Errorf("killed no-writes script at apply time: %s, want %s", got, want)
			}
			return
		}
	}
	t.Fatal("the no-writes script always ended before it was killed")
}

// killEverywhere runs EVAL of src through addr, waits until every node
// answers BUSY, sends SCRIPT KILL to every node and returns the script's
// reply; false if a node's run ended before the kill reached it.
func killEverywhere(t *testing.T, c *testCluster, addr, src string) (string, bool) {
	var conns []*kvdiff.Conn
	for id := uint64(1); id <= 3; id++ {
		cn := dialRESP2(t, c.node(id).ClientAddr())
		// A follower may still be applying the previous script.
		for deadline := time.Now().Add(time.Minute); !strings.Contains(doRendered(t, cn, "SCRIPT", "KILL"), "NOTBUSY"); {
			if time.Now().After(deadline) {
				t.Fatal("a node still runs a script after a minute")
			}
			time.Sleep(10 * time.Millisecond)
		}
		doRendered(t, cn, "CONFIG", "SET", "busy-reply-threshold", "20")
		conns = append(conns, cn)
	}
	a := dialRESP2(t, addr)
	done := make(chan string, 1)
	go func() {
		v, err := a.Do("EVAL", src, "0")
		if err != nil {
			done <- "connection error: " + err.Error()
			return
		}
		done <- kvdiff.Render(v)
	}()
	for _, cn := range conns {
		for !strings.HasPrefix(doRendered(t, cn, "PING"), "(error) BUSY ") {
			select {
			case <-done:
				return "", false
			default:
			}
		}
	}
	ok := true
	for _, cn := range conns {
		switch r := doRendered(t, cn, "SCRIPT", "KILL"); {
		case strings.Contains(r, "NOTBUSY"):
			ok = false
		case r != "OK":
			t.Fatalf("SCRIPT KILL of a no-writes script at apply time: %s", r)
		}
	}
	got := <-done
	for _, cn := range conns {
		doRendered(t, cn, "CONFIG", "SET", "busy-reply-threshold", "5000")
	}
	return got, ok
}
