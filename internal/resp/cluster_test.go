package resp

import (
	"strconv"
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

// TestClusterRepliesSplit checks the CLUSTER discovery commands for a
// topology of three ranges led by two nodes: one SLOTS entry and one
// shard per range, NODES listing each leader's intervals (adjacent ones
// merged), and INFO and REPLICAS counting per range.
func TestClusterRepliesSplit(t *testing.T) {
	topo := clusterTopology()
	m1, m2, m3 := topo.Master, topo.Replicas[0], topo.Replicas[1]
	m3.Down, m3.Disconnected = false, false
	id1, id2, id3 := m1.ID, m2.ID, m3.ID
	topo.Replicas[1] = m3
	topo.Self = m2
	// [0, 99] and [100, 4095] led by node 1 (adjacent: merged in NODES),
	// [4096, 16383] by node 2, this node.
	topo.Slots = []SlotRange{
		{Start: 0, End: 99, Master: m1, Replicas: []Instance{m2, m3}},
		{Start: 100, End: 4095, Master: m1, Replicas: []Instance{m2, m3}},
		{Start: 4096, End: 16383, Master: m2, Replicas: []Instance{m1, m3}},
	}
	b := &clusterBackend{topoBackend: &topoBackend{fakeBackend: newFakeBackend(), t: topo}}
	_, addr := startServer(t, Config{}, b)
	c := dialRaw(t, addr)
	node := func(in Instance) string {
		return "*4\r\n" + bulks(in.Host) + ":" + strconv.Itoa(in.Port) + "\r\n" + bulks(in.ID) + "*0\r\n"
	}

	c.cmd("CLUSTER", "SLOTS")
	want := "*3\r\n" +
		"*5\r\n:0\r\n:99\r\n" + node(m1) + node(m2) + node(m3) +
		"*5\r\n:100\r\n:4095\r\n" + node(m1) + node(m2) + node(m3) +
		"*5\r\n:4096\r\n:16383\r\n" + node(m2) + node(m1) + node(m3)
	if got := c.reply(); got != want {
		t.Errorf("SLOTS:\n got %q\nwant %q", got, want)
	}
	c.cmd("CLUSTER", "NODES")
	nodes := id1 + " 10.0.0.1:6379@7379 master - 0 0 4 connected 0-4095\n" +
		id2 + " 10.0.0.2:6380@7380 myself,master - 0 0 4 connected 4096-16383\n" +
		id3 + " 10.0.0.3:6381@7381 slave " + id1 + " 0 0 4 connected\n"
	if got := c.reply(); got != bulks(nodes) {
		t.Errorf("NODES:\n got %q\nwant %q", got, bulks(nodes))
	}
	c.cmd("CLUSTER", "INFO")
	if got := c.reply(); !strings.Contains(got, "\r\ncluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\ncluster_slots_pfail:0\r\ncluster_slots_fail:0\r\n") ||
		!strings.Contains(got, "cluster_known_nodes:3\r\ncluster_size:2\r\n") {
		t.Errorf("INFO: %q", got)
	}
	// Node 2 leads one range; its replicas are that range's other
	// members, node 1 printed as the master it is.
	c.cmd("CLUSTER", "REPLICAS", id2)
	if got, want := c.reply(), "*2\r\n"+bulks(id1+" 10.0.0.1:6379@7379 master - 0 0 4 connected 0-4095\n", id3+" 10.0.0.3:6381@7381 slave "+id1+" 0 0 4 connected\n"); got != want {
		t.Errorf("REPLICAS of node 2:\n got %q\nwant %q", got, want)
	}
	// Node 1 leads two ranges with the same members: each listed once.
	c.cmd("CLUSTER", "REPLICAS", id1)
	if got := c.reply(); !strings.HasPrefix(got, "*2\r\n") || !strings.Contains(got, id2+" 10.0.0.2:6380@7380 myself,master") {
		t.Errorf("REPLICAS of node 1: %q", got)
	}
	c.cmd("CLUSTER", "REPLICAS", id3)
	if got := c.reply(); got != "-ERR The specified node is not a master\r\n" {
		t.Errorf("REPLICAS of node 3: %q", got)
	}

	c.cmd("HELLO", "3")
	c.reply()
	c.cmd("CLUSTER", "SHARDS")
	got := c.reply()
	shard := func(start, end string, ids ...string) string {
		return "%2\r\n" + bulks("slots") + "*2\r\n:" + start + "\r\n:" + end + "\r\n" + bulks("nodes") + "*" + strconv.Itoa(len(ids)) + "\r\n%7\r\n" + bulks("id", ids[0])
	}
	if !strings.HasPrefix(got, "*3\r\n"+shard("0", "99", id1, id2, id3)) ||
		!strings.Contains(got, shard("100", "4095", id1, id2, id3)) || !strings.Contains(got, shard("4096", "16383", id2, id1, id3)) ||
		strings.Count(got, bulks("role", "master")) != 3 || strings.Count(got, bulks("role", "replica")) != 6 {
		t.Errorf("SHARDS: %q", got)
	}

	// Node 1 unreachable: its two ranges' slots fail and leave SLOTS;
	// the range with no leader known is unassigned and listed by nobody.
	m1.Down = true
	b.t.Slots[0].Master, b.t.Slots[1].Master = m1, m1
	b.t.Slots[2].Master, b.t.Slots[2].Replicas = Instance{Down: true, Disconnected: true}, []Instance{m1, m2, m3}
	c.cmd("CLUSTER", "INFO")
	if got := c.reply(); !strings.Contains(got, "cluster_state:fail\r\ncluster_slots_assigned:4096\r\ncluster_slots_ok:0\r\ncluster_slots_pfail:0\r\ncluster_slots_fail:4096\r\n") ||
		!strings.Contains(got, "cluster_size:1\r\n") {
		t.Errorf("INFO with node 1 down and no leader for 4096-16383: %q", got)
	}
	c.cmd("CLUSTER", "SLOTS")
	if got := c.reply(); got != "*0\r\n" {
		t.Errorf("SLOTS with no reachable leader: %q", got)
	}
	c.cmd("CLUSTER", "NODES")
	if got := c.reply(); !strings.Contains(got, id1+" 10.0.0.1:6379@7379 master,fail - 0 0 4 connected 0-4095\n") ||
		!strings.Contains(got, id2+" 10.0.0.2:6380@7380 myself,slave "+id1) {
		t.Errorf("NODES with node 1 down: %q", got)
	}
}
