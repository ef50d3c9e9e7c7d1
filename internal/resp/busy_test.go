package resp

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/reply"
)

// fakeScripts is a node whose oldest script is busy (or not) at will.
type fakeScripts struct {
	mu        sync.Mutex
	busy, fn  bool
	threshold time.Duration // the last threshold asked about
	kills     []bool
}

func (f *fakeScripts) Busy(threshold time.Duration) (bool, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.threshold = threshold
	return f.busy, f.fn
}

func (f *fakeScripts) Kill(function bool) reply.Reply {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kills = append(f.kills, function)
	return reply.OK
}

func (f *fakeScripts) set(busy, fn bool) {
	f.mu.Lock()
	f.busy, f.fn = busy, fn
	f.mu.Unlock()
}

// While the node is busy, only Redis's allow_busy commands run; SCRIPT
// KILL and FUNCTION KILL are answered by the node's Scripts, never by the
// backend; busy-reply-threshold is what Busy is asked about.
func TestBusyReply(t *testing.T) {
	sc := &fakeScripts{}
	b := newFakeBackend()
	_, addr := startServer(t, Config{Scripts: sc}, b)
	c := dialRaw(t, addr)
	do := func(args ...string) string {
		t.Helper()
		c.cmd(args...)
		return c.reply()
	}
	const busyEval = "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
	const busyFn = "-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n"

	if got := do("PING"); got != "+PONG\r\n" {
		t.Fatalf("PING: %q", got)
	}
	if got := do("CONFIG", "SET", "lua-time-limit", "50"); got != "+OK\r\n" {
		t.Fatalf("CONFIG SET: %q", got)
	}
	do("PING")
	sc.mu.Lock()
	th := sc.threshold
	sc.mu.Unlock()
	if th != 50*time.Millisecond {
		t.Fatalf("threshold %v, want 50ms", th)
	}
	b.reset()
	sc.set(true, false)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"PING"}, busyEval},
		{[]string{"GET", "k"}, busyEval},
		{[]string{"CONFIG", "GET", "timeout"}, busyEval},
		{[]string{"FUNCTION", "STATS"}, busyEval},
		{[]string{"SCRIPT", "KILL"}, "+OK\r\n"},
		{[]string{"function", "kill"}, "+OK\r\n"},
		{[]string{"EXEC"}, "-EXECABORT Transaction discarded because of: " + busyEval[1:]},
		{[]string{"WATCH", "k"}, "+OK\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"SET", "k", "v"}, busyEval},
		{[]string{"DISCARD"}, "+OK\r\n"},
		{[]string{"NOSUCH"}, "-ERR unknown command 'NOSUCH', with args beginning with: \r\n"},
	} {
		if got := do(tc.args...); got != tc.want {
			t.Errorf("%s while busy: %q, want %q", strings.Join(tc.args, " "), got, tc.want)
		}
	}
	sc.set(true, true)
	if got := do("GET", "k"); got != busyFn {
		t.Errorf("GET while a function is busy: %q", got)
	}
	if got := do("FUNCTION", "STATS"); strings.HasPrefix(got, "-BUSY") {
		t.Errorf("FUNCTION STATS while a function is busy: %q", got)
	}
	sc.mu.Lock()
	kills := sc.kills
	sc.mu.Unlock()
	if len(kills) != 2 || kills[0] || !kills[1] {
		t.Errorf("kills %v, want [false true]", kills)
	}
	for _, call := range b.doCalls() {
		for _, name := range call {
			if name != "FUNCTION" {
				t.Errorf("the backend got %s while busy", name)
			}
		}
	}
	sc.set(false, false)
	if got := do("GET", "k"); got != "$-1\r\n" {
		t.Errorf("GET once not busy: %q", got)
	}
}
