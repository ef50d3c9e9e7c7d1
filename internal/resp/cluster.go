package resp

import (
	"context"
	"crypto/tls"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/kvorum/kvorum/internal/cmdspec"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/slot"
)

// Redis Cluster's discovery commands, so that a cluster-aware client
// (go-redis's ClusterClient, redis-py's RedisCluster, redis-cli -c) routes
// each key to the node that serves its hash slot. Every node answers with
// the same map: the slots of each range, served by the range's Raft leader
// (the "master") with its other members as replicas. Today there is one
// range, so every slot is the leader's (docs/ranges.md §5). The replies
// have Redis 7.0's shapes (cluster.c).
//
// A connection that has sent a CLUSTER command is cluster-aware: a command
// on a key whose slot this node does not serve answers -MOVED <slot>
// <address> of the node that does (what a cluster client expects), where
// a plain client's connection is forwarded to the leader as always. With
// READONLY (Redis Cluster's reads on a replica) its reads are served here.

// SlotRouter is a Backend that can tell a cluster-aware connection where
// a slot is served (-MOVED).
type SlotRouter interface {
	// MovedTo returns the client address of the node that serves slot,
	// ok=false when it is this node or none is known (the command then
	// runs here, forwarded as for any client). tls: the address of a TLS
	// port.
	MovedTo(slot uint16, tls bool) (addr string, ok bool)
}

// SlotKeys is a Backend that can list the keys of a hash slot (CLUSTER
// COUNTKEYSINSLOT and GETKEYSINSLOT), as a linearizable read.
type SlotKeys interface {
	// KeysInSlot returns up to max keys of slot (all: max < 0; none,
	// only counted: max == 0) and how many it counted; an error reply if
	// the node cannot read.
	KeysInSlot(ctx context.Context, slot uint16, max int) (keys [][]byte, n int, errR *reply.Reply)
}

// clusterUnsupported are the subcommands that place slots or drive a
// Redis Cluster's own gossip and failover, which kvorum does otherwise.
var clusterUnsupported = func() map[string]string {
	m := map[string]string{}
	add := func(why string, names ...string) {
		for _, n := range names {
			m[n] = why
		}
	}
	add("slots belong to kvorum's ranges, which kvorum places and splits itself (`kvorum ctl range list`)",
		"addslots", "addslotsrange", "delslots", "delslotsrange", "flushslots", "setslot")
	add("members are added and removed with `kvorum ctl member add|remove`", "meet", "forget", "replicate", "reset")
	add("Raft elects each range's leader; move it with `kvorum ctl transfer-leader`", "failover")
	add("kvorum has no cluster bus: nodes talk over the peer port", "links", "count-failure-reports")
	add("kvorum has no cluster configuration epochs or file: the ranges' state is replicated by Raft",
		"bumpepoch", "set-config-epoch", "saveconfig")
	return m
}()

// clusterCommand is the CLUSTER container with the discovery subcommands
// (Redis 7.0's arities, flags and ACL categories).
func clusterCommand() *command {
	slow := []string{"@slow"}
	admin := []string{"@admin", "@slow", "@dangerous"}
	stale := []string{"stale"}
	sub := func(name string, arity int, flags, cats []string, since, summary string, h func(c *conn, args [][]byte) reply.Reply) *command {
		c := connCmd("cluster|"+name, arity, flags, cats, since, summary, h)
		c.spec.Group = "cluster"
		return c
	}
	s := connCmd("cluster", -2, []string{}, slow, "3.0.0", "A container for Redis Cluster commands", nil)
	s.spec.Group = "cluster"
	s.subs = []*command{
		sub("help", 2, []string{"loading", "stale"}, slow, "5.0.0", "Returns helpful text about the different subcommands", clusterHelp),
		sub("countkeysinslot", 3, stale, slow, "3.0.0", "Returns the number of keys in a hash slot", clusterCountKeys),
		sub("getkeysinslot", 4, stale, slow, "3.0.0", "Returns the key names in a hash slot", clusterGetKeys),
		sub("info", 2, stale, slow, "3.0.0", "Returns information about the state of a node", clusterInfo),
		sub("keyslot", 3, stale, slow, "3.0.0", "Returns the hash slot for a key", clusterKeySlot),
		sub("myid", 2, stale, slow, "3.0.0", "Returns the ID of a node", clusterMyID),
		sub("nodes", 2, stale, slow, "3.0.0", "Returns the cluster configuration for a node", clusterNodes),
		sub("replicas", 3, []string{"admin", "stale"}, admin, "5.0.0", "Lists the replica nodes of a master node", clusterReplicas),
		sub("shards", 2, stale, slow, "7.0.0", "Returns the mapping of cluster slots to shards", clusterShards),
		sub("slaves", 3, []string{"admin", "stale"}, admin, "3.0.0", "Lists the replica nodes of a master node", clusterReplicas),
		sub("slots", 2, stale, slow, "3.0.0", "Returns the mapping of cluster slots to nodes", clusterSlots),
	}
	for _, sc := range s.subs {
		switch sc.spec.Name {
		case "cluster|getkeysinslot", "cluster|info", "cluster|nodes", "cluster|replicas", "cluster|shards", "cluster|slaves", "cluster|slots":
			sc.tips = []string{"nondeterministic_output"}
		}
	}
	container := containerHandler(s)
	s.handler = func(c *conn, args [][]byte) reply.Reply {
		name := strings.ToLower(string(args[1]))
		if why, ok := clusterUnsupported[name]; ok {
			return reply.Error("ERR 'CLUSTER " + strings.ToUpper(name) + "' is not supported by kvorum: " + why)
		}
		c.clusterAware = true
		return container(c, args)
	}
	return s
}

// askingCommand is ASKING: accepted and ignored. kvorum never answers
// -ASK: a slot changes owner at once with its range, never half-migrated.
func askingCommand() *command {
	a := connCmd("asking", 1, []string{"fast"}, []string{"@fast", "@connection"}, "3.0.0",
		"Signals that a cluster client is following an -ASK redirect", func(*conn, [][]byte) reply.Reply { return reply.OK })
	a.spec.Group = "cluster"
	return a
}

func clusterHelp(c *conn, args [][]byte) reply.Reply {
	return helpReply("CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"COUNTKEYSINSLOT <slot>",
		"    Return the number of keys in <slot>.",
		"GETKEYSINSLOT <slot> <count>",
		"    Return key names stored by current node in a slot.",
		"INFO",
		"    Return information about the cluster.",
		"KEYSLOT <key>",
		"    Return the hash slot for <key>.",
		"MYID",
		"    Return the node id.",
		"NODES",
		"    Return cluster configuration seen by node. Output format:",
		"    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
		"REPLICAS <node-id>",
		"    Return <node-id> replicas.",
		"SLOTS",
		"    Return information about slots range mappings. Each range is made of:",
		"    start, end, master and replicas IP addresses, ports and ids",
		"SHARDS",
		"    Return information about slot range mappings and the nodes associated with them.",
		"(kvorum: the slots of each range are served by its Raft leader, the master;",
		"its other members are the replicas. Slots are placed by kvorum, not by hand.)",
		"HELP",
		"    Prints this help.")
}

func clusterKeySlot(c *conn, args [][]byte) reply.Reply {
	c.clusterAware = true
	return reply.Int(int64(slot.Of(args[2])))
}

// slotKeys reads a slot's keys through the backend.
func (c *conn) slotKeys(s int64, max int) ([][]byte, int, *reply.Reply) {
	sk, ok := c.s.b.(SlotKeys)
	if !ok {
		e := reply.Error("ERR this server cannot list a slot's keys: no cluster backend")
		return nil, 0, &e
	}
	return sk.KeysInSlot(c.ctx, uint16(s), max)
}

func clusterCountKeys(c *conn, args [][]byte) reply.Reply {
	s, err := strconv.ParseInt(string(args[2]), 10, 64)
	if err != nil {
		return reply.Error("ERR value is not an integer or out of range")
	}
	if s < 0 || s >= slot.Count {
		return reply.Error("ERR Invalid slot")
	}
	_, n, errR := c.slotKeys(s, 0)
	if errR != nil {
		return *errR
	}
	return reply.Int(int64(n))
}

func clusterGetKeys(c *conn, args [][]byte) reply.Reply {
	s, err1 := strconv.ParseInt(string(args[2]), 10, 64)
	max, err2 := strconv.ParseInt(string(args[3]), 10, 64)
	if err1 != nil || err2 != nil {
		return reply.Error("ERR value is not an integer or out of range")
	}
	if s < 0 || s >= slot.Count || max < 0 {
		return reply.Error("ERR Invalid slot or number of keys")
	}
	if max == 0 {
		return reply.Array()
	}
	keys, _, errR := c.slotKeys(s, int(min(max, 1<<30)))
	if errR != nil {
		return *errR
	}
	out := make([]reply.Reply, len(keys))
	for i, k := range keys {
		out[i] = reply.Bulk(k)
	}
	return reply.Array(out...)
}

func clusterMyID(c *conn, args [][]byte) reply.Reply {
	t, errR := c.topology()
	if errR != nil {
		return *errR
	}
	return reply.BulkString(t.Self.ID)
}

// clusterMembers is the cluster in CLUSTER terms: the master (Raft
// leader) first, then the replicas, this node among them.
func clusterMembers(t Topology) []Instance {
	out := make([]Instance, 0, 1+len(t.Replicas))
	out = append(out, t.Master)
	for _, r := range t.Replicas {
		if r.ID != t.Master.ID {
			out = append(out, r)
		}
	}
	return out
}

func clusterState(t Topology) string {
	if t.Master.Down {
		return "fail"
	}
	return "ok"
}

func clusterInfo(c *conn, args [][]byte) reply.Reply {
	t, errR := c.topology()
	if errR != nil {
		return *errR
	}
	ok, fail := slot.Count, 0
	if t.Master.Down {
		ok, fail = 0, slot.Count
	}
	epoch := strconv.FormatUint(t.Epoch, 10)
	var b strings.Builder
	for _, kv := range [][2]string{
		{"cluster_state", clusterState(t)},
		{"cluster_slots_assigned", strconv.Itoa(slot.Count)},
		{"cluster_slots_ok", strconv.Itoa(ok)},
		{"cluster_slots_pfail", "0"},
		{"cluster_slots_fail", strconv.Itoa(fail)},
		{"cluster_known_nodes", strconv.Itoa(len(clusterMembers(t)))},
		{"cluster_size", "1"},
		{"cluster_current_epoch", epoch},
		{"cluster_my_epoch", epoch},
		{"cluster_stats_messages_sent", "0"},
		{"cluster_stats_messages_received", "0"},
		{"total_cluster_links_buffer_limit_exceeded", "0"},
	} {
		b.WriteString(kv[0] + ":" + kv[1] + "\r\n")
	}
	return reply.Verbatim(b.String())
}

// nodeLine is one line of CLUSTER NODES.
func nodeLine(t Topology, in Instance, master bool) string {
	flags := "slave"
	if master {
		flags = "master"
	}
	if in.ID == t.Self.ID {
		flags = "myself," + flags
	}
	if in.Down {
		flags += ",fail"
	}
	of, slots := t.Master.ID, ""
	if master {
		of, slots = "-", " 0-"+strconv.Itoa(slot.Count-1)
	}
	link := "connected"
	if in.Disconnected {
		link = "disconnected"
	}
	return in.ID + " " + net.JoinHostPort(in.Host, strconv.Itoa(in.Port)) + "@" + strconv.Itoa(in.BusPort) + " " + flags + " " + of +
		" 0 0 " + strconv.FormatUint(t.Epoch, 10) + " " + link + slots + "\n"
}

func clusterNodes(c *conn, args [][]byte) reply.Reply {
	t, errR := c.topology()
	if errR != nil {
		return *errR
	}
	var b strings.Builder
	for i, in := range clusterMembers(t) {
		b.WriteString(nodeLine(t, in, i == 0))
	}
	return reply.Verbatim(b.String())
}

func clusterReplicas(c *conn, args [][]byte) reply.Reply {
	t, errR := c.topology()
	if errR != nil {
		return *errR
	}
	members := clusterMembers(t)
	id := string(args[2])
	var out []reply.Reply
	switch {
	case id == t.Master.ID:
		for _, in := range members[1:] {
			out = append(out, reply.BulkString(nodeLine(t, in, false)))
		}
	case !containsID(members, id):
		return reply.Error("ERR Unknown node " + id)
	default:
		return reply.Error("ERR The specified node is not a master")
	}
	return reply.Array(out...)
}

func containsID(ins []Instance, id string) bool {
	for _, in := range ins {
		if in.ID == id {
			return true
		}
	}
	return false
}

// slotsNode is a node in CLUSTER SLOTS: ip, port, id and (7.0) a map of
// further networking metadata, empty here.
func slotsNode(in Instance) reply.Reply {
	return reply.Array(reply.BulkString(in.Host), reply.Int(int64(in.Port)), reply.BulkString(in.ID), reply.Map())
}

func clusterSlots(c *conn, args [][]byte) reply.Reply {
	t, errR := c.topology()
	if errR != nil {
		return *errR
	}
	if t.Master.Down {
		return reply.Array() // no slot is served
	}
	elems := []reply.Reply{reply.Int(0), reply.Int(slot.Count - 1)}
	for _, in := range clusterMembers(t) {
		if !in.Down {
			elems = append(elems, slotsNode(in))
		}
	}
	return reply.Array(reply.Array(elems...))
}

func clusterShards(c *conn, args [][]byte) reply.Reply {
	t, errR := c.topology()
	if errR != nil {
		return *errR
	}
	str := reply.BulkString
	var nodes []reply.Reply
	for i, in := range clusterMembers(t) {
		role, health := "replica", "online"
		if i == 0 {
			role = "master"
		}
		if in.Down {
			health = "failed"
		}
		port := "port"
		if _, isTLS := c.nc.(*tls.Conn); isTLS {
			port = "tls-port"
		}
		nodes = append(nodes, reply.Map(str("id"), str(in.ID), str(port), reply.Int(int64(in.Port)),
			str("ip"), str(in.Host), str("endpoint"), str(in.Host), str("role"), str(role),
			str("replication-offset"), reply.Int(int64(in.Offset)), str("health"), str(health)))
	}
	return reply.Array(reply.Map(str("slots"), reply.Array(reply.Int(0), reply.Int(slot.Count-1)),
		str("nodes"), reply.Array(nodes...)))
}

// moved is the -MOVED answer for a cluster-aware connection's command on
// a key whose slot another node serves; ok=false: run it here.
func (c *conn) moved(cmd *command, args [][]byte) (reply.Reply, bool) {
	router, ok := c.s.b.(SlotRouter)
	if !ok || cmd == nil {
		return reply.Reply{}, false
	}
	if c.readOnly && !slices.Contains(cmd.spec.Flags, "write") {
		return reply.Reply{}, false // READONLY: reads are served by any replica
	}
	var buf [4][]byte
	keys := cmdspec.Keys(buf[:0], &cmd.spec, args)
	if len(keys) == 0 {
		return reply.Reply{}, false
	}
	s := slot.Of(keys[0])
	_, isTLS := c.nc.(*tls.Conn)
	addr, ok := router.MovedTo(s, isTLS)
	if !ok {
		return reply.Reply{}, false
	}
	return reply.Error("MOVED " + strconv.Itoa(int(s)) + " " + addr), true
}
