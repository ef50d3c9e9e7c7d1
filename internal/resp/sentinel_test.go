package resp

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// topoBackend is a fakeBackend that knows a fixed topology.
type topoBackend struct {
	*fakeBackend
	t Topology
}

func (b *topoBackend) Topology(context.Context, bool) Topology { return b.t }

func testTopology() Topology {
	return Topology{
		MasterName: "mymaster",
		MyID:       strings.Repeat("ab", 20),
		Master:     Instance{Host: "10.0.0.1", Port: 6379, RunID: "r1", Offset: 7},
		Replicas: []Instance{
			{Host: "10.0.0.2", Port: 6380, RunID: "r2", Offset: 5, LastOK: 12 * time.Millisecond},
			{Host: "10.0.0.3", Port: 6381, RunID: "r3", Down: true, Disconnected: true, LastOK: 3 * time.Second, DownFor: 2 * time.Second},
		},
		Sentinels: []Instance{
			{Host: "10.0.0.1", Port: 6379, RunID: strings.Repeat("01", 20)},
			{Host: "10.0.0.3", Port: 6381, RunID: strings.Repeat("03", 20), Down: true, Disconnected: true, LastOK: 3 * time.Second, DownFor: 2 * time.Second},
		},
		Self:      Instance{Host: "10.0.0.2", Port: 6380, RunID: "r2", Offset: 5},
		Voters:    3,
		Epoch:     4,
		DownAfter: time.Second,
	}
}

// bulks renders RESP2 bulk strings.
func bulks(ss ...string) string {
	var b strings.Builder
	for _, s := range ss {
		b.WriteString("$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n")
	}
	return b.String()
}

// TestSentinelReplies checks the exact frames of the discovery commands
// and ROLE, in RESP2 and RESP3, against a fixed topology.
func TestSentinelReplies(t *testing.T) {
	b := &topoBackend{fakeBackend: newFakeBackend(), t: testTopology()}
	_, addr := startServer(t, Config{}, b)
	c := dialRaw(t, addr)

	c.cmd("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster")
	if got, want := c.reply(), "*2\r\n"+bulks("10.0.0.1", "6379"); got != want {
		t.Errorf("GET-MASTER-ADDR-BY-NAME: %q, want %q", got, want)
	}
	c.cmd("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "other")
	if got := c.reply(); got != "*-1\r\n" {
		t.Errorf("GET-MASTER-ADDR-BY-NAME of another name: %q, want a null array", got)
	}
	c.cmd("SENTINEL", "MASTER", "mymaster")
	wantMaster := "*40\r\n" + bulks("name", "mymaster", "ip", "10.0.0.1", "port", "6379", "runid", "r1", "flags", "master",
		"link-pending-commands", "0", "link-refcount", "1", "last-ping-sent", "0", "last-ok-ping-reply", "0",
		"last-ping-reply", "0", "down-after-milliseconds", "1000", "info-refresh", "0", "role-reported", "master",
		"role-reported-time", "0", "config-epoch", "4", "num-slaves", "2", "num-other-sentinels", "2", "quorum", "2",
		"failover-timeout", "180000", "parallel-syncs", "1")
	if got := c.reply(); got != wantMaster {
		t.Errorf("MASTER:\n got %q\nwant %q", got, wantMaster)
	}
	c.cmd("SENTINEL", "MASTERS")
	if got := c.reply(); got != "*1\r\n"+wantMaster {
		t.Errorf("MASTERS: %q", got)
	}
	c.cmd("SENTINEL", "REPLICAS", "mymaster")
	want := "*2\r\n*42\r\n" + bulks("name", "10.0.0.2:6380", "ip", "10.0.0.2", "port", "6380", "runid", "r2", "flags", "slave",
		"link-pending-commands", "0", "link-refcount", "1", "last-ping-sent", "0", "last-ok-ping-reply", "12",
		"last-ping-reply", "12", "down-after-milliseconds", "1000", "info-refresh", "12", "role-reported", "slave",
		"role-reported-time", "12", "master-link-down-time", "0", "master-link-status", "ok", "master-host", "10.0.0.1",
		"master-port", "6379", "slave-priority", "100", "slave-repl-offset", "5", "replica-announced", "1") +
		"*44\r\n" + bulks("name", "10.0.0.3:6381", "ip", "10.0.0.3", "port", "6381", "runid", "r3", "flags", "s_down,slave,disconnected",
		"link-pending-commands", "0", "link-refcount", "1", "last-ping-sent", "0", "last-ok-ping-reply", "3000",
		"last-ping-reply", "3000", "s-down-time", "2000", "down-after-milliseconds", "1000", "info-refresh", "3000", "role-reported", "slave",
		"role-reported-time", "3000", "master-link-down-time", "0", "master-link-status", "err", "master-host", "10.0.0.1",
		"master-port", "6379", "slave-priority", "100", "slave-repl-offset", "0", "replica-announced", "1")
	if got := c.reply(); got != want {
		t.Errorf("REPLICAS:\n got %q\nwant %q", got, want)
	}
	c.cmd("SENTINEL", "SENTINELS", "mymaster")
	first := "*28\r\n" + bulks("name", strings.Repeat("01", 20), "ip", "10.0.0.1", "port", "6379", "runid", strings.Repeat("01", 20), "flags", "sentinel",
		"link-pending-commands", "0", "link-refcount", "1", "last-ping-sent", "0", "last-ok-ping-reply", "0",
		"last-ping-reply", "0", "down-after-milliseconds", "1000", "last-hello-message", "0", "voted-leader", "?", "voted-leader-epoch", "0")
	if got := c.reply(); !strings.HasPrefix(got, "*2\r\n"+first+"*30\r\n") || !strings.Contains(got, bulks("flags", "s_down,sentinel,disconnected")) {
		t.Errorf("SENTINELS: %q", got)
	}
	c.cmd("SENTINEL", "MYID")
	if got := c.reply(); got != bulks(strings.Repeat("ab", 20)) {
		t.Errorf("MYID: %q", got)
	}
	c.cmd("SENTINEL", "CKQUORUM", "mymaster")
	if got := c.reply(); got != "+OK 2 usable Sentinels. Quorum and failover authorization can be reached\r\n" {
		t.Errorf("CKQUORUM: %q", got)
	}
	c.cmd("ROLE")
	if got, want := c.reply(), "*5\r\n"+bulks("slave", "10.0.0.1")+":6379\r\n"+bulks("connected")+":5\r\n"; got != want {
		t.Errorf("ROLE: %q, want %q", got, want)
	}
	b.t.SelfLeads, b.t.Self = true, b.t.Master
	c.cmd("ROLE")
	if got, want := c.reply(), "*3\r\n"+bulks("master")+":7\r\n*1\r\n*3\r\n"+bulks("10.0.0.2", "6380", "5"); got != want {
		t.Errorf("leader's ROLE: %q, want %q (the replicas that answer)", got, want)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"SENTINEL", "MASTER", "x"}, "-ERR No such master with that name\r\n"},
		{[]string{"SENTINEL", "slaves", "x"}, "-ERR No such master with that name\r\n"},
		{[]string{"SENTINEL", "bogus"}, "-ERR unknown subcommand 'bogus'. Try SENTINEL HELP.\r\n"},
		{[]string{"SENTINEL", "myid", "x"}, "-ERR wrong number of arguments for 'sentinel|myid' command\r\n"},
		{[]string{"SENTINEL", "is-master-down-by-addr", "a", "1", "2", "*"}, "-ERR 'SENTINEL IS-MASTER-DOWN-BY-ADDR' is not supported by kvorum: kvorum's nodes do not vote as Sentinels: Raft elects the leader\r\n"},
	} {
		c.cmd(tc.args...)
		if got := c.reply(); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.args, got, tc.want)
		}
	}
	c.cmd("SENTINEL", "HELP")
	if got := c.reply(); !strings.Contains(got, "GET-MASTER-ADDR-BY-NAME <master-name>") || strings.Contains(got, "MONITOR") {
		t.Errorf("HELP: %q", got)
	}

	// RESP3: maps, and a null.
	c.cmd("HELLO", "3")
	c.reply()
	c.cmd("SENTINEL", "MASTER", "mymaster")
	if got := c.reply(); !strings.HasPrefix(got, "%20\r\n"+bulks("name", "mymaster")) {
		t.Errorf("RESP3 MASTER: %q", got)
	}
	c.cmd("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "other")
	if got := c.reply(); got != "_\r\n" {
		t.Errorf("RESP3 null master: %q", got)
	}

	// No leader known: a null master, flagged down; ROLE connects.
	b.t = testTopology()
	b.t.Master.Down, b.t.Master.Disconnected, b.t.Master.DownFor = true, true, time.Second
	c.cmd("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster")
	if got := c.reply(); got != "_\r\n" {
		t.Errorf("no leader: %q, want a null", got)
	}
	c.cmd("SENTINEL", "MASTER", "mymaster")
	if got := c.reply(); !strings.Contains(got, bulks("flags", "s_down,o_down,master,disconnected")) || !strings.Contains(got, bulks("o-down-time", "1000")) {
		t.Errorf("no leader MASTER: %q", got)
	}
	c.cmd("ROLE")
	if got := c.reply(); !strings.Contains(got, bulks("connect")) {
		t.Errorf("no leader ROLE: %q", got)
	}
	if calls := b.doCalls(); len(calls) != 0 {
		t.Errorf("the backend ran %v", calls)
	}
}

// TestSentinelWithoutDiscovery: a backend that cannot tell who leads
// gets an error, not a crash.
func TestSentinelWithoutDiscovery(t *testing.T) {
	_, addr := startServer(t, Config{}, newFakeBackend())
	c := dialRaw(t, addr)
	for _, args := range [][]string{{"SENTINEL", "MASTERS"}, {"ROLE"}} {
		c.cmd(args...)
		if got := c.reply(); !strings.HasPrefix(got, "-ERR this server cannot tell who leads") {
			t.Errorf("%v: %q", args, got)
		}
	}
}
