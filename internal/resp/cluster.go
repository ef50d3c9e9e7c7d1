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
// (the "master") with its other members as replicas (Topology.Slots; each
// range has its own leader, so after splits several nodes may be masters,
// docs/ranges.md §5). The replies have Redis 7.0's shapes (cluster.c).
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

// clusterMembers is range 1's group in CLUSTER terms: the master (Raft
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

// slotRanges are the topology's slot intervals: t.Slots, or the single
// interval of every slot served by range 1's group when the backend
// knows no other (as before ranges split).
func slotRanges(t Topology) []SlotRange {
	if len(t.Slots) > 0 {
		return t.Slots
	}
	m := clusterMembers(t)
	return []SlotRange{{Start: 0, End: slot.Count - 1, Master: m[0], Replicas: m[1:]}}
}

// clusterNode is one node of CLUSTER NODES: the slot intervals it leads
// (none: a replica).
type clusterNode struct {
	in    Instance
	slots [][2]int
}

// clusterNodeList lists every node once: the masters in the order of their
// first interval (the one master first, as before splits), then the
// other members. A node's slots are the intervals it leads, adjacent
// ones merged (as Redis prints a master's slots).
func clusterNodeList(t Topology) []*clusterNode {
	var out []*clusterNode
	byID := map[string]*clusterNode{}
	add := func(in Instance) *clusterNode {
		if in.ID == "" {
			return nil // no leader known: nobody to list
		}
		if cn := byID[in.ID]; cn != nil {
			return cn
		}
		cn := &clusterNode{in: in}
		byID[in.ID] = cn
		out = append(out, cn)
		return cn
	}
	ranges := slotRanges(t)
	for _, r := range ranges {
		if cn := add(r.Master); cn != nil {
			if k := len(cn.slots); k > 0 && cn.slots[k-1][1]+1 == r.Start {
				cn.slots[k-1][1] = r.End
			} else {
				cn.slots = append(cn.slots, [2]int{r.Start, r.End})
			}
		}
	}
	for _, r := range ranges {
		for _, in := range r.Replicas {
			add(in)
		}
	}
	for _, in := range clusterMembers(t) {
		add(in)
	}
	return out
}

// slotCounts counts the slots whose range has a known leader (assigned)
// and, of those, the ones whose leader is reachable (ok).
func slotCounts(t Topology) (assigned, ok int) {
	for _, r := range slotRanges(t) {
		if r.Master.ID == "" && len(t.Slots) > 0 {
			continue
		}
		assigned += r.End - r.Start + 1
		if !r.Master.Down {
			ok += r.End - r.Start + 1
		}
	}
	return assigned, ok
}

func clusterInfo(c *conn, args [][]byte) reply.Reply {
	t, errR := c.topology()
	if errR != nil {
		return *errR
	}
	assigned, ok := slotCounts(t)
	state := "ok"
	if ok < slot.Count {
		// Redis with cluster-require-full-coverage (its default): a
		// slot nobody serves fails the cluster.
		state = "fail"
	}
	nodes := clusterNodeList(t)
	masters := 0
	for _, cn := range nodes {
		if len(cn.slots) > 0 {
			masters++
		}
	}
	epoch := strconv.FormatUint(t.Epoch, 10)
	var b strings.Builder
	for _, kv := range [][2]string{
		{"cluster_state", state},
		{"cluster_slots_assigned", strconv.Itoa(assigned)},
		{"cluster_slots_ok", strconv.Itoa(ok)},
		{"cluster_slots_pfail", "0"},
		{"cluster_slots_fail", strconv.Itoa(assigned - ok)},
		{"cluster_known_nodes", strconv.Itoa(len(nodes))},
		{"cluster_size", strconv.Itoa(masters)},
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

// nodeLine is one line of CLUSTER NODES. A node that leads no range is
// a replica of range 1's leader (Redis has one master per replica).
func nodeLine(t Topology, cn *clusterNode) string {
	in := cn.in
	master := len(cn.slots) > 0
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
		of = "-"
		for _, sr := range cn.slots {
			slots += " " + strconv.Itoa(sr[0])
			if sr[1] != sr[0] {
				slots += "-" + strconv.Itoa(sr[1])
			}
		}
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
	for _, cn := range clusterNodeList(t) {
		b.WriteString(nodeLine(t, cn))
	}
	return reply.Verbatim(b.String())
}

// clusterReplicas is CLUSTER REPLICAS <id>: the other members of the
// ranges the node leads, each once, as their CLUSTER NODES lines.
func clusterReplicas(c *conn, args [][]byte) reply.Reply {
	t, errR := c.topology()
	if errR != nil {
		return *errR
	}
	id := string(args[2])
	nodes := clusterNodeList(t)
	byID := map[string]*clusterNode{}
	for _, cn := range nodes {
		byID[cn.in.ID] = cn
	}
	switch cn := byID[id]; {
	case cn == nil:
		return reply.Error("ERR Unknown node " + id)
	case len(cn.slots) == 0:
		return reply.Error("ERR The specified node is not a master")
	}
	seen := map[string]bool{id: true}
	var out []reply.Reply
	for _, r := range slotRanges(t) {
		if r.Master.ID != id {
			continue
		}
		for _, in := range r.Replicas {
			if !seen[in.ID] && byID[in.ID] != nil {
				seen[in.ID] = true
				out = append(out, reply.BulkString(nodeLine(t, byID[in.ID])))
			}
		}
	}
	return reply.Array(out...)
}

// slotsNode is a node in CLUSTER SLOTS: ip, port, id and (7.0) a map of
// further networking metadata, empty here.
func slotsNode(in Instance) reply.Reply {
	return reply.Array(reply.BulkString(in.Host), reply.Int(int64(in.Port)), reply.BulkString(in.ID), reply.Map())
}

// clusterSlots is CLUSTER SLOTS: per range, its interval, its leader,
// then its reachable replicas. A range whose leader is unknown or down
// is left out, as Redis leaves out the slots no node serves.
func clusterSlots(c *conn, args [][]byte) reply.Reply {
	t, errR := c.topology()
	if errR != nil {
		return *errR
	}
	var out []reply.Reply
	for _, r := range slotRanges(t) {
		if r.Master.Down || r.Master.ID == "" {
			continue
		}
		elems := []reply.Reply{reply.Int(int64(r.Start)), reply.Int(int64(r.End)), slotsNode(r.Master)}
		for _, in := range r.Replicas {
			if !in.Down && in.ID != r.Master.ID {
				elems = append(elems, slotsNode(in))
			}
		}
		out = append(out, reply.Array(elems...))
	}
	return reply.Array(out...)
}

// clusterShards is CLUSTER SHARDS: a shard per range, its leader first.
func clusterShards(c *conn, args [][]byte) reply.Reply {
	t, errR := c.topology()
	if errR != nil {
		return *errR
	}
	str := reply.BulkString
	port := "port"
	if _, isTLS := c.nc.(*tls.Conn); isTLS {
		port = "tls-port"
	}
	node := func(in Instance, role string) reply.Reply {
		health := "online"
		if in.Down {
			health = "failed"
		}
		return reply.Map(str("id"), str(in.ID), str(port), reply.Int(int64(in.Port)),
			str("ip"), str(in.Host), str("endpoint"), str(in.Host), str("role"), str(role),
			str("replication-offset"), reply.Int(int64(in.Offset)), str("health"), str(health))
	}
	var shards []reply.Reply
	for _, r := range slotRanges(t) {
		var nodes []reply.Reply
		if r.Master.ID != "" {
			nodes = append(nodes, node(r.Master, "master"))
		}
		for _, in := range r.Replicas {
			if in.ID != r.Master.ID {
				nodes = append(nodes, node(in, "replica"))
			}
		}
		shards = append(shards, reply.Map(str("slots"), reply.Array(reply.Int(int64(r.Start)), reply.Int(int64(r.End))),
			str("nodes"), reply.Array(nodes...)))
	}
	return reply.Array(shards...)
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
