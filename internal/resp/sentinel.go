package resp

import (
	"context"
	"crypto/tls"
	"strconv"
	"strings"
	"time"

	"github.com/kvorum/kvorum/internal/acl"
	"github.com/kvorum/kvorum/internal/reply"
)

// Redis Sentinel's discovery commands, answered by every node, so that a
// client written for Sentinel (go-redis's NewFailoverClient, redis-py's
// Sentinel, ...) given the nodes' client addresses as its "sentinels"
// finds the node that leads, and finds it again after a failover. The
// "master" is the Raft leader, the "replicas" the other members, the
// "sentinels" the other members again (each node answers as a sentinel).
// Nothing here decides a failover: Raft does. The replies have Redis
// 7.0's shapes (sentinel.c, addReplySentinelRedisInstance): a map per
// instance, a flat field/value array in RESP2, every value a bulk string.

// Discovery is a Backend that can tell who leads the cluster: ROLE and
// the SENTINEL commands need it (without it they answer an error).
type Discovery interface {
	// Topology returns the cluster as this node sees it now. tls: the
	// asking client is on the TLS port (addresses of TLS ports, where
	// the nodes have them).
	Topology(ctx context.Context, tls bool) Topology
}

// Topology is the cluster as one node sees it, in Sentinel's terms.
type Topology struct {
	// MasterName is the name the SENTINEL commands know the cluster by
	// (--sentinel-master-name).
	MasterName string
	// MyID is this node's Sentinel id (40 hex digits, stable).
	MyID string
	// Master is the leader; with Master.Down no leader is known or it
	// cannot be reached (then it is the last leader known, or this node).
	Master Instance
	// Self is this node; SelfLeads: it is the leader.
	Self      Instance
	SelfLeads bool
	// Replicas are the members that do not lead (this node included when
	// it follows); Sentinels the members other than this node.
	Replicas, Sentinels []Instance
	// Voters is the number of voting members (the quorum is a majority).
	Voters int
	// Epoch is the Raft term (config-epoch).
	Epoch uint64
	// DownAfter is how long a member may stay silent before it is
	// reported s_down (down-after-milliseconds).
	DownAfter time.Duration
	// Slots are the ranges' slot intervals, sorted by Start, for the
	// CLUSTER commands (each range has its own leader); the Sentinel
	// commands and ROLE use Master and Replicas above (range 1) only.
	// Empty: one interval of every slot served by Master, with Replicas
	// (a backend that knows one group only).
	Slots []SlotRange
}

// SlotRange is one range's slot interval as CLUSTER SLOTS reports it.
type SlotRange struct {
	// Start and End bound the interval, both inclusive (Redis prints
	// them so).
	Start, End int
	// Master is the range's leader; Master.Down: it is not reachable,
	// and Master.ID is "" when no leader is known at all (then no node
	// serves the interval).
	Master Instance
	// Replicas are the range's other members.
	Replicas []Instance
}

// Instance is one node as a Sentinel reports it.
type Instance struct {
	Host  string
	Port  int
	RunID string // the node's INFO run_id (a sentinel: its MyID)
	// Down: no reply from it within DownAfter (s_down); Disconnected:
	// its last probe failed.
	Down, Disconnected bool
	// LastOK is how long ago it last answered; DownFor how long it has
	// been down (with Down).
	LastOK, DownFor time.Duration
	// Offset is its applied log index (slave-repl-offset).
	Offset uint64
	// ID is its stable id, 40 hex digits (CLUSTER MYID and NODES);
	// BusPort its peer port (the @cport of CLUSTER NODES).
	ID      string
	BusPort int
}

// sentinelUnsupported are Redis Sentinel's subcommands that configure or
// drive a Sentinel's own monitoring and failover, which kvorum's Raft
// does instead.
var sentinelUnsupported = map[string]string{
	"monitor":                "kvorum's nodes are the one monitored master: the Raft group",
	"remove":                 "kvorum's nodes are the one monitored master: the Raft group",
	"set":                    "failover is Raft's and has no Sentinel parameters",
	"failover":               "Raft elects the leader; move it with `kvorum ctl transfer-leader`",
	"reset":                  "there is no Sentinel state to reset: the topology is Raft's",
	"flushconfig":            "there is no Sentinel configuration file: kvorum is configured by its flags",
	"config":                 "there is no Sentinel configuration: kvorum is configured by its flags",
	"debug":                  "there are no Sentinel timers: failures are detected by Raft",
	"info-cache":             "kvorum's nodes do not poll each other's INFO",
	"is-master-down-by-addr": "kvorum's nodes do not vote as Sentinels: Raft elects the leader",
	"pending-scripts":        "kvorum runs no Sentinel scripts",
	"simulate-failure":       "kvorum runs no Sentinel failover to crash",
}

// sentinelCommand is the SENTINEL container with the discovery
// subcommands (Redis's flags and ACL categories: admin, @admin @slow
// @dangerous).
func sentinelCommand() *command {
	flags := []string{"admin", "noscript", "loading", "stale"}
	cats := []string{"@admin", "@slow", "@dangerous"}
	sub := func(name string, arity int, since, summary string, h func(c *conn, args [][]byte) reply.Reply) *command {
		c := connCmd("sentinel|"+name, arity, flags, cats, since, summary, h)
		c.spec.Group = "sentinel"
		return c
	}
	s := connCmd("sentinel", -2, flags, cats, "2.8.4", "A container for Sentinel commands", nil)
	s.spec.Group = "sentinel"
	s.subs = []*command{
		sub("ckquorum", 3, "2.8.4", "Checks for a Redis Sentinel quorum", sentinelCkQuorum),
		sub("get-master-addr-by-name", 3, "2.8.4", "Returns the port and address of a master Redis instance", sentinelGetMasterAddr),
		sub("help", 2, "6.2.0", "Returns helpful text about the different subcommands", sentinelHelp),
		sub("master", 3, "2.8.4", "Returns the state of a master Redis instance", sentinelMaster),
		sub("masters", 2, "2.8.4", "Returns a list of monitored Redis masters", sentinelMasters),
		sub("myid", 2, "6.2.0", "Returns the Redis Sentinel instance ID", sentinelMyID),
		sub("replicas", 3, "5.0.0", "Returns a list of the monitored Redis replicas", sentinelReplicas),
		sub("sentinels", 3, "2.8.4", "Returns a list of Sentinel instances", sentinelSentinels),
		sub("slaves", 3, "2.8.0", "Returns a list of the monitored replicas", sentinelReplicas),
	}
	container := containerHandler(s)
	s.handler = func(c *conn, args [][]byte) reply.Reply {
		if why, ok := sentinelUnsupported[strings.ToLower(string(args[1]))]; ok {
			return reply.Error("ERR 'SENTINEL " + strings.ToUpper(string(args[1])) + "' is not supported by kvorum: " + why)
		}
		return container(c, args)
	}
	return s
}

// roleCommand is ROLE: the leader answers as a master (its replicas: the
// other members), the others as replicas of the leader.
func roleCommand() *command {
	r := connCmd("role", 1, []string{"noscript", "loading", "stale", "fast"}, []string{"@admin", "@fast", "@dangerous"},
		"2.8.12", "Returns the replication role", roleCmd)
	r.spec.Group = "server"
	return r
}

// sentinelACLCommands are the SENTINEL command and its subcommands in
// the ACL universe (redis-server outside Sentinel mode has no SENTINEL).
func sentinelACLCommands() []acl.CommandSpec {
	cats := acl.CatAdmin | acl.CatSlow | acl.CatDangerous
	out := []acl.CommandSpec{{Name: "sentinel", Arity: -2, Categories: cats}}
	for _, sc := range sentinelCommand().subs {
		out = append(out, acl.CommandSpec{Name: sc.spec.Name, Arity: sc.spec.Arity, Categories: cats})
	}
	return out
}

// topology asks the backend; ok=false with the error to answer when the
// backend cannot tell.
func (c *conn) topology() (Topology, *reply.Reply) {
	d, ok := c.s.b.(Discovery)
	if !ok {
		e := reply.Error("ERR this server cannot tell who leads: no cluster backend")
		return Topology{}, &e
	}
	_, isTLS := c.nc.(*tls.Conn)
	return d.Topology(c.ctx, isTLS), nil
}

var errNoSuchMaster = reply.Error("ERR No such master with that name")

// namedTopology is topology for a command naming a master: Redis's error
// for another name.
func (c *conn) namedTopology(name []byte) (Topology, *reply.Reply) {
	t, errR := c.topology()
	if errR != nil {
		return t, errR
	}
	if string(name) != t.MasterName {
		return t, &errNoSuchMaster
	}
	return t, nil
}

func sentinelGetMasterAddr(c *conn, args [][]byte) reply.Reply {
	t, errR := c.topology()
	if errR != nil {
		return *errR
	}
	// A name Sentinel does not monitor, and (kvorum) a master nobody can
	// reach: a null array, which clients take as "ask another sentinel".
	if string(args[2]) != t.MasterName || t.Master.Down {
		return reply.NilArray
	}
	return reply.Array(reply.BulkString(t.Master.Host), reply.BulkString(strconv.Itoa(t.Master.Port)))
}

func sentinelMasters(c *conn, args [][]byte) reply.Reply {
	t, errR := c.topology()
	if errR != nil {
		return *errR
	}
	return reply.Array(masterInstance(t))
}

func sentinelMaster(c *conn, args [][]byte) reply.Reply {
	t, errR := c.namedTopology(args[2])
	if errR != nil {
		return *errR
	}
	return masterInstance(t)
}

func sentinelReplicas(c *conn, args [][]byte) reply.Reply {
	t, errR := c.namedTopology(args[2])
	if errR != nil {
		return *errR
	}
	out := make([]reply.Reply, 0, len(t.Replicas))
	for _, r := range t.Replicas {
		out = append(out, replicaInstance(t, r))
	}
	return reply.Array(out...)
}

func sentinelSentinels(c *conn, args [][]byte) reply.Reply {
	t, errR := c.namedTopology(args[2])
	if errR != nil {
		return *errR
	}
	out := make([]reply.Reply, 0, len(t.Sentinels))
	for _, s := range t.Sentinels {
		out = append(out, sentinelInstance(t, s))
	}
	return reply.Array(out...)
}

func sentinelMyID(c *conn, args [][]byte) reply.Reply {
	t, errR := c.topology()
	if errR != nil {
		return *errR
	}
	return reply.BulkString(t.MyID)
}

// sentinelCkQuorum counts this node and the other members it hears from
// as the usable sentinels; the quorum is a majority of the voters, which
// is also what Raft needs to elect a leader.
func sentinelCkQuorum(c *conn, args [][]byte) reply.Reply {
	t, errR := c.namedTopology(args[2])
	if errR != nil {
		return *errR
	}
	usable := 1
	for _, s := range t.Sentinels {
		if !s.Down {
			usable++
		}
	}
	quorum := t.quorum()
	voters := len(t.Sentinels) + 1
	if usable >= quorum && usable >= voters/2+1 {
		return reply.Status("OK " + strconv.Itoa(usable) + " usable Sentinels. Quorum and failover authorization can be reached")
	}
	e := "NOQUORUM " + strconv.Itoa(usable) + " usable Sentinels. "
	noQuorum := usable < quorum
	if noQuorum {
		e += "Not enough available Sentinels to reach the specified quorum for this master"
	}
	if usable < voters/2+1 {
		if noQuorum {
			e += ". "
		}
		e += "Not enough available Sentinels to reach the majority and authorize a failover"
	}
	return reply.Error(e)
}

func sentinelHelp(c *conn, args [][]byte) reply.Reply {
	return helpReply("SENTINEL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"CKQUORUM <master-name>",
		"    Check if the current Sentinel configuration is able to reach the quorum",
		"    needed to failover a master and the majority needed to authorize the",
		"    failover.",
		"GET-MASTER-ADDR-BY-NAME <master-name>",
		"    Return the ip and port number of the master with that name.",
		"MASTER <master-name>",
		"    Show the state and info of the specified master.",
		"MASTERS",
		"    Show a list of monitored masters and their state.",
		"MYID",
		"    Return the ID of the Sentinel instance.",
		"REPLICAS <master-name>",
		"    Show a list of replicas for this master and their state.",
		"SENTINELS <master-name>",
		"    Show a list of Sentinel instances for this master and their state.",
		"(kvorum: the master is the Raft leader; Raft, not Sentinel, elects it.)",
		"HELP",
		"    Print this help.")
}

func (t *Topology) quorum() int {
	if t.Voters <= 0 {
		return 1
	}
	return t.Voters/2 + 1
}

// instanceFields is the start of addReplySentinelRedisInstance's reply,
// common to every kind of instance.
type instanceFields []reply.Reply

func (f *instanceFields) add(k, v string) {
	*f = append(*f, reply.BulkString(k), reply.BulkString(v))
}

func (f *instanceFields) addInt(k string, v int64) { f.add(k, strconv.FormatInt(v, 10)) }

func ms(d time.Duration) int64 { return d.Milliseconds() }

// common adds the fields every instance has, up to down-after-milliseconds.
func (f *instanceFields) common(t Topology, name string, in Instance, role string, oDown bool) {
	f.add("name", name)
	f.add("ip", in.Host)
	f.addInt("port", int64(in.Port))
	f.add("runid", in.RunID)
	var flags []string
	if in.Down {
		flags = append(flags, "s_down")
	}
	if oDown {
		flags = append(flags, "o_down")
	}
	flags = append(flags, role)
	if in.Disconnected {
		flags = append(flags, "disconnected")
	}
	f.add("flags", strings.Join(flags, ","))
	f.addInt("link-pending-commands", 0)
	f.addInt("link-refcount", 1)
	f.addInt("last-ping-sent", 0)
	f.addInt("last-ok-ping-reply", ms(in.LastOK))
	f.addInt("last-ping-reply", ms(in.LastOK))
	if in.Down {
		f.addInt("s-down-time", ms(in.DownFor))
	}
	if oDown {
		f.addInt("o-down-time", ms(in.DownFor))
	}
	f.addInt("down-after-milliseconds", ms(t.DownAfter))
}

// masterInstance is SENTINEL MASTER's reply: the leader. A master that
// is down is o_down too (kvorum's nodes agree on it through Raft: no
// leader is no leader for anyone).
func masterInstance(t Topology) reply.Reply {
	var f instanceFields
	m := t.Master
	f.common(t, t.MasterName, m, "master", m.Down)
	f.addInt("info-refresh", ms(m.LastOK))
	f.add("role-reported", "master")
	f.addInt("role-reported-time", ms(m.LastOK))
	f.addInt("config-epoch", int64(t.Epoch))
	f.addInt("num-slaves", int64(len(t.Replicas)))
	f.addInt("num-other-sentinels", int64(len(t.Sentinels)))
	f.addInt("quorum", int64(t.quorum()))
	f.addInt("failover-timeout", 180000)
	f.addInt("parallel-syncs", 1)
	return reply.Map(f...)
}

func replicaInstance(t Topology, r Instance) reply.Reply {
	var f instanceFields
	f.common(t, r.Host+":"+strconv.Itoa(r.Port), r, "slave", false)
	f.addInt("info-refresh", ms(r.LastOK))
	f.add("role-reported", "slave")
	f.addInt("role-reported-time", ms(r.LastOK))
	f.addInt("master-link-down-time", 0)
	if r.Down || t.Master.Down {
		f.add("master-link-status", "err")
	} else {
		f.add("master-link-status", "ok")
	}
	f.add("master-host", t.Master.Host)
	f.addInt("master-port", int64(t.Master.Port))
	f.addInt("slave-priority", 100)
	f.add("slave-repl-offset", strconv.FormatUint(r.Offset, 10))
	f.addInt("replica-announced", 1)
	return reply.Map(f...)
}

func sentinelInstance(t Topology, s Instance) reply.Reply {
	var f instanceFields
	f.common(t, s.RunID, s, "sentinel", false)
	f.addInt("last-hello-message", ms(s.LastOK))
	f.add("voted-leader", "?")
	f.addInt("voted-leader-epoch", 0)
	return reply.Map(f...)
}

// roleCmd: on the leader ["master", offset, [[ip, port, offset], ...]]
// with the replicas that answer; elsewhere ["slave", leader ip, leader
// port, "connected" (or "connect" with no reachable leader), offset].
func roleCmd(c *conn, args [][]byte) reply.Reply {
	t, errR := c.topology()
	if errR != nil {
		return *errR
	}
	if t.SelfLeads {
		var reps []reply.Reply
		for _, r := range t.Replicas {
			if r.Down {
				continue
			}
			reps = append(reps, reply.Array(reply.BulkString(r.Host), reply.BulkString(strconv.Itoa(r.Port)),
				reply.BulkString(strconv.FormatUint(r.Offset, 10))))
		}
		return reply.Array(reply.BulkString("master"), reply.Int(int64(t.Self.Offset)), reply.Array(reps...))
	}
	state := "connected"
	if t.Master.Down {
		state = "connect"
	}
	return reply.Array(reply.BulkString("slave"), reply.BulkString(t.Master.Host), reply.Int(int64(t.Master.Port)),
		reply.BulkString(state), reply.Int(int64(t.Self.Offset)))
}

// RunID is the server's run id (INFO run_id), random for each process.
func (s *Server) RunID() string { return s.runID }
