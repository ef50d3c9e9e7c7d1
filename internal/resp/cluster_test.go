package resp

import (
	"strings"
	"testing"
)

// clusterBackend is a topoBackend that also routes slots for -MOVED.
type clusterBackend struct {
	*topoBackend
	movedTo string // "": serve here
}

func (b *clusterBackend) MovedTo(uint16, bool) (string, bool) { return b.movedTo, b.movedTo != "" }

func clusterTopology() Topology {
	t := testTopology()
	t.Master.ID, t.Master.BusPort = strings.Repeat("01", 20), 7379
	t.Replicas[0].ID, t.Replicas[0].BusPort = strings.Repeat("02", 20), 7380
	t.Replicas[1].ID, t.Replicas[1].BusPort = strings.Repeat("03", 20), 7381
	t.Self = t.Replicas[0]
	return t
}

// TestClusterReplies checks the frames of the CLUSTER discovery commands
// (the shapes redis-server 7.0.15 gives with cluster-enabled yes), and
// -MOVED for a connection that sent one.
func TestClusterReplies(t *testing.T) {
	b := &clusterBackend{topoBackend: &topoBackend{fakeBackend: newFakeBackend(), t: clusterTopology()}, movedTo: "10.0.0.1:6379"}
	_, addr := startServer(t, Config{}, b)
	c := dialRaw(t, addr)
	id1, id2, id3 := strings.Repeat("01", 20), strings.Repeat("02", 20), strings.Repeat("03", 20)

	c.cmd("SET", "foo", "bar")
	if got := c.reply(); got != "+OK\r\n" {
		t.Fatalf("SET before any CLUSTER command: %q (want it run here)", got)
	}
	c.cmd("CLUSTER", "SLOTS")
	node := func(host, port, id string) string {
		return "*4\r\n" + bulks(host) + ":" + port + "\r\n" + bulks(id) + "*0\r\n"
	}
	if got, want := c.reply(), "*1\r\n*4\r\n:0\r\n:16383\r\n"+node("10.0.0.1", "6379", id1)+node("10.0.0.2", "6380", id2); got != want {
		t.Errorf("SLOTS:\n got %q\nwant %q (the down replica left out)", got, want)
	}
	c.cmd("CLUSTER", "MYID")
	if got := c.reply(); got != bulks(id2) {
		t.Errorf("MYID: %q", got)
	}
	c.cmd("CLUSTER", "KEYSLOT", "{user1000}.following")
	if got := c.reply(); got != ":3443\r\n" {
		t.Errorf("KEYSLOT: %q", got)
	}
	c.cmd("CLUSTER", "NODES")
	nodes := id1 + " 10.0.0.1:6379@7379 master - 0 0 4 connected 0-16383\n" +
		id2 + " 10.0.0.2:6380@7380 myself,slave " + id1 + " 0 0 4 connected\n" +
		id3 + " 10.0.0.3:6381@7381 slave,fail " + id1 + " 0 0 4 disconnected\n"
	if got := c.reply(); got != bulks(nodes) {
		t.Errorf("NODES:\n got %q\nwant %q", got, bulks(nodes))
	}
	c.cmd("CLUSTER", "INFO")
	if got := c.reply(); !strings.HasPrefix(got, "$") || !strings.Contains(got, "\r\ncluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\n") ||
		!strings.Contains(got, "cluster_known_nodes:3\r\ncluster_size:1\r\ncluster_current_epoch:4\r\n") {
		t.Errorf("INFO: %q", got)
	}
	c.cmd("CLUSTER", "REPLICAS", id1)
	if got := c.reply(); !strings.HasPrefix(got, "*2\r\n") || !strings.Contains(got, id3+" 10.0.0.3:6381@7381 slave,fail") {
		t.Errorf("REPLICAS: %q", got)
	}
	for _, tc := range []struct{ args []string }{{[]string{"CLUSTER", "REPLICAS", id2}}, {[]string{"CLUSTER", "REPLICAS", "x"}}} {
		c.cmd(tc.args...)
		if got := c.reply(); got != "-ERR The specified node is not a master\r\n" && got != "-ERR Unknown node x\r\n" {
			t.Errorf("%v: %q", tc.args, got)
		}
	}
	c.cmd("CLUSTER", "ADDSLOTS", "1")
	if got := c.reply(); !strings.HasPrefix(got, "-ERR 'CLUSTER ADDSLOTS' is not supported by kvorum: ") {
		t.Errorf("ADDSLOTS: %q", got)
	}
	c.cmd("CLUSTER", "BOGUS")
	if got := c.reply(); got != "-ERR unknown subcommand 'BOGUS'. Try CLUSTER HELP.\r\n" {
		t.Errorf("BOGUS: %q", got)
	}
	c.cmd("ASKING")
	if got := c.reply(); got != "+OK\r\n" {
		t.Errorf("ASKING: %q", got)
	}

	// Cluster-aware now: keys another node serves answer -MOVED.
	c.cmd("SET", "foo", "bar")
	if got := c.reply(); got != "-MOVED 12182 10.0.0.1:6379\r\n" {
		t.Errorf("SET after CLUSTER SLOTS: %q", got)
	}
	c.cmd("PING")
	if got := c.reply(); got != "+PONG\r\n" {
		t.Errorf("PING: %q", got)
	}
	c.cmd("READONLY")
	c.reply()
	c.cmd("GET", "foo")
	if got := c.reply(); strings.HasPrefix(got, "-MOVED") {
		t.Errorf("READONLY GET: %q (want it served here)", got)
	}
	c.cmd("DEL", "foo")
	if got := c.reply(); got != "-MOVED 12182 10.0.0.1:6379\r\n" {
		t.Errorf("READONLY DEL: %q", got)
	}
	b.movedTo = ""
	c.cmd("SET", "foo", "bar")
	if got := c.reply(); got != "+OK\r\n" {
		t.Errorf("SET when this node serves the slot: %q", got)
	}
	b.movedTo = "10.0.0.1:6379"
	c.cmd("RESET")
	c.reply()
	c.cmd("SET", "foo", "bar")
	if got := c.reply(); got != "+OK\r\n" {
		t.Errorf("SET after RESET: %q (no longer cluster-aware)", got)
	}

	// RESP3: SLOTS' metadata is a map; SHARDS a map per shard and node.
	c.cmd("HELLO", "3")
	c.reply()
	c.cmd("CLUSTER", "SHARDS")
	want := "*1\r\n%2\r\n" + bulks("slots") + "*2\r\n:0\r\n:16383\r\n" + bulks("nodes") + "*3\r\n" +
		"%7\r\n" + bulks("id", id1, "port") + ":6379\r\n" + bulks("ip", "10.0.0.1", "endpoint", "10.0.0.1", "role", "master", "replication-offset") + ":7\r\n" + bulks("health", "online") +
		"%7\r\n" + bulks("id", id2, "port") + ":6380\r\n" + bulks("ip", "10.0.0.2", "endpoint", "10.0.0.2", "role", "replica", "replication-offset") + ":5\r\n" + bulks("health", "online") +
		"%7\r\n" + bulks("id", id3, "port") + ":6381\r\n" + bulks("ip", "10.0.0.3", "endpoint", "10.0.0.3", "role", "replica", "replication-offset") + ":0\r\n" + bulks("health", "failed")
	if got := c.reply(); got != want {
		t.Errorf("SHARDS:\n got %q\nwant %q", got, want)
	}
	c.cmd("CLUSTER", "SLOTS")
	if got := c.reply(); !strings.HasSuffix(got, bulks(id2)+"%0\r\n") {
		t.Errorf("RESP3 SLOTS: %q", got)
	}
	c.cmd("CLUSTER", "INFO")
	if got := c.reply(); !strings.HasPrefix(got, "=") || !strings.Contains(got, "txt:cluster_state:ok\r\n") {
		t.Errorf("RESP3 INFO: %q", got)
	}

	b.t.Master.Down = true
	c.cmd("CLUSTER", "INFO")
	if got := c.reply(); !strings.Contains(got, "cluster_state:fail\r\n") || !strings.Contains(got, "cluster_slots_fail:16384\r\n") {
		t.Errorf("INFO without a leader: %q", got)
	}
	c.cmd("CLUSTER", "SLOTS")
	if got := c.reply(); got != "*0\r\n" {
		t.Errorf("SLOTS without a leader: %q", got)
	}
}
