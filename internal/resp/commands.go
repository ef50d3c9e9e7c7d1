package resp

import (
	"cmp"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvorum/kvorum/internal/acl"
	"github.com/kvorum/kvorum/internal/cmdspec"
	"github.com/kvorum/kvorum/internal/glob"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/resp/codec"
)

// command is an entry of the server's command table: a connection command
// (handler set) or a data command from Config.Commands (handler nil; kept
// for COMMAND output and metrics).
type command struct {
	spec    cmdspec.Spec
	handler func(c *conn, args [][]byte) reply.Reply
	acl     []string
	tips    []string
	since   string
	subs    []*command // container commands (CLIENT, COMMAND)
	calls   prometheus.Counter
	latency prometheus.Observer
	stats   cmdStats // INFO commandstats (stats.go)
	// fast: Redis's flag (LATENCY's fast-command event); skipSlowlog:
	// Redis's skip_slowlog (EXEC), kept out of SLOWLOG.
	fast, skipSlowlog bool
}

var connFlags = []string{"noscript", "loading", "stale", "fast", "no_auth", "allow_busy"}

func connCmd(name string, arity int, flags []string, acl []string, since, summary string,
	h func(c *conn, args [][]byte) reply.Reply) *command {
	return &command{
		spec:    cmdspec.Spec{Name: name, Arity: arity, Flags: flags, Group: "connection", Summary: summary},
		handler: h,
		acl:     acl,
		since:   since,
	}
}

// connCommands is the table of commands the server answers itself.
func connCommands() []*command {
	fastConn := []string{"@fast", "@connection"}
	slowConn := []string{"@slow", "@connection"}
	cmdFlags := []string{"loading", "stale"}
	clientFlags := []string{"noscript", "loading", "stale"}
	sub := func(parent, name string, arity int, flags, acl []string, since, summary string,
		h func(c *conn, args [][]byte) reply.Reply) *command {
		c := connCmd(parent+"|"+name, arity, flags, acl, since, summary, h)
		return c
	}
	client := connCmd("client", -2, nil, []string{"@slow"}, "2.4.0", "A container for client connection commands", nil)
	client.subs = []*command{
		sub("client", "id", 2, clientFlags, slowConn, "5.0.0", "Returns the unique client ID of the connection", clientID),
		sub("client", "setname", 3, clientFlags, slowConn, "2.6.9", "Sets the connection name", clientSetName),
		sub("client", "getname", 2, clientFlags, slowConn, "2.6.9", "Returns the name of the connection", clientGetName),
		sub("client", "info", 2, clientFlags, slowConn, "6.2.0", "Returns information about the connection", clientInfo),
		sub("client", "list", -2, append([]string{"admin"}, clientFlags...), []string{"@admin", "@slow", "@dangerous", "@connection"}, "2.4.0", "Lists open connections", clientList),
		sub("client", "setinfo", 4, clientFlags, slowConn, "7.2.0", "Sets information specific to the client or connection", clientSetInfo),
		sub("client", "no-evict", 3, append([]string{"admin"}, clientFlags...), []string{"@admin", "@slow", "@dangerous", "@connection"}, "7.0.0", "Sets the client eviction mode of the connection", clientOnOff),
		sub("client", "no-touch", 3, clientFlags, slowConn, "7.2.0", "Controls whether commands sent by the client affect the LRU/LFU of accessed keys", clientOnOff),
		sub("client", "reply", 3, clientFlags, slowConn, "3.2.0", "Instructs the server whether to reply to commands", clientReply),
		sub("client", "unblock", -3, append([]string{"admin"}, clientFlags...), []string{"@admin", "@slow", "@dangerous", "@connection"}, "5.0.0", "Unblocks a client blocked by a blocking command from a different connection", clientUnblock),
		sub("client", "help", 2, clientFlags, slowConn, "5.0.0", "Returns helpful text about the different subcommands", clientHelp),
	}
	client.handler = containerHandler(client)
	cmdCmd := connCmd("command", -1, cmdFlags, slowConn, "2.8.13", "Returns detailed information about all commands", nil)
	cmdCmd.tips = []string{"nondeterministic_output_order"}
	cmdCmd.subs = []*command{
		sub("command", "count", 2, cmdFlags, slowConn, "2.8.13", "Returns a count of commands", commandCount),
		sub("command", "docs", -2, cmdFlags, slowConn, "7.0.0", "Returns documentary information about one, multiple or all commands", commandDocs),
		sub("command", "info", -2, cmdFlags, slowConn, "2.8.13", "Returns information about one, multiple or all commands", commandInfoCmd),
		sub("command", "list", -2, cmdFlags, slowConn, "7.0.0", "Returns a list of command names", commandList),
		sub("command", "getkeys", -4, cmdFlags, slowConn, "2.8.13", "Extract keys given a full Redis command", commandGetKeys),
		sub("command", "getkeysandflags", -4, cmdFlags, slowConn, "7.0.0", "Extract keys and access flags given a full Redis command", commandGetKeys),
		sub("command", "help", 2, cmdFlags, slowConn, "5.0.0", "Returns helpful text about the different subcommands", commandHelp),
	}
	containerH := containerHandler(cmdCmd)
	cmdCmd.handler = func(c *conn, args [][]byte) reply.Reply {
		if len(args) == 1 {
			return c.s.commandInfos(nil)
		}
		return containerH(c, args)
	}
	txFlags := []string{"noscript", "loading", "stale", "fast", "allow_busy"}
	txACL := []string{"@fast", "@transaction"}
	watch := connCmd("watch", -2, txFlags, txACL, "2.2.0", "Monitors changes to keys to determine the execution of a transaction", watchCmd)
	watch.spec.FirstKey, watch.spec.LastKey, watch.spec.Step = 1, -1, 1
	subFlags := []string{"pubsub", "noscript", "loading", "stale"}
	subACL := []string{"@pubsub", "@slow"}
	psFlags := []string{"pubsub", "loading", "stale"}
	pubsub := connCmd("pubsub", -2, nil, []string{"@slow"}, "2.8.0", "A container for Pub/Sub commands", nil)
	pubsub.subs = []*command{
		sub("pubsub", "channels", -2, psFlags, subACL, "2.8.0", "Returns the active channels", pubsubChannels),
		sub("pubsub", "numsub", -2, psFlags, subACL, "2.8.0", "Returns a count of subscribers to channels", pubsubNumSub),
		sub("pubsub", "numpat", 2, psFlags, subACL, "2.8.0", "Returns a count of unique pattern subscriptions", pubsubNumPat),
		sub("pubsub", "shardchannels", -2, psFlags, subACL, "7.0.0", "Returns the active shard channels", pubsubShardChannels),
		sub("pubsub", "shardnumsub", -2, psFlags, subACL, "7.0.0", "Returns the count of subscribers of shard channels", pubsubShardNumSub),
	}
	pubsub.handler = containerHandler(pubsub)
	cmds := []*command{
		connCmd("ping", -1, []string{"fast"}, fastConn, "1.0.0", "Returns the server's liveliness response", ping),
		connCmd("echo", 2, []string{"loading", "stale", "fast"}, fastConn, "1.0.0", "Returns the given string", echo),
		connCmd("hello", -1, connFlags, fastConn, "6.0.0", "Handshakes with the Redis server", hello),
		connCmd("auth", -2, connFlags, fastConn, "1.0.0", "Authenticates the connection", auth),
		connCmd("select", 2, []string{"loading", "stale", "fast"}, fastConn, "1.0.0", "Changes the selected database", selectDB),
		connCmd("quit", -1, connFlags, fastConn, "1.0.0", "Closes the connection", quit),
		connCmd("reset", 1, connFlags, fastConn, "6.2.0", "Resets the connection", reset),
		connCmd("time", 1, []string{"loading", "stale", "fast"}, []string{"@fast"}, "2.6.0", "Returns the server time", timeCmd),
		connCmd("readonly", 1, []string{"loading", "stale", "fast"}, []string{"@fast", "@connection"}, "3.0.0", "Enables read queries for a connection to a cluster replica node", readOnlyCmd),
		connCmd("readwrite", 1, []string{"loading", "stale", "fast"}, []string{"@fast", "@connection"}, "3.0.0", "Disables read queries for a connection to a cluster replica node", readWriteCmd),
		connCmd("info", -1, []string{"loading", "stale"}, []string{"@slow", "@dangerous"}, "1.0.0", "Returns information and statistics about the server", info),
		client,
		cmdCmd,
		connCmd("multi", 1, txFlags, txACL, "1.2.0", "Starts a transaction", multiCmd),
		connCmd("exec", 1, []string{"noscript", "loading", "stale", "skip_slowlog"}, []string{"@slow", "@transaction"}, "1.2.0", "Executes all commands in a transaction", execCmd),
		connCmd("discard", 1, txFlags, txACL, "2.0.0", "Discards a transaction", discardCmd),
		watch,
		connCmd("unwatch", 1, txFlags, txACL, "2.2.0", "Forgets about watched keys of a transaction", unwatchCmd),
		connCmd("subscribe", -2, subFlags, subACL, "2.0.0", "Listens for messages published to channels", subscribeCmd),
		connCmd("psubscribe", -2, subFlags, subACL, "2.0.0", "Listens for messages published to channels that match one or more patterns", subscribeCmd),
		connCmd("unsubscribe", -1, subFlags, subACL, "2.0.0", "Stops listening to messages posted to channels", unsubscribeCmd),
		connCmd("punsubscribe", -1, subFlags, subACL, "2.0.0", "Stops listening to messages published to channels that match one or more patterns", unsubscribeCmd),
		connCmd("ssubscribe", -2, subFlags, subACL, "7.0.0", "Listens for messages published to shard channels", subscribeCmd),
		connCmd("sunsubscribe", -1, subFlags, subACL, "7.0.0", "Stops listening to messages posted to shard channels", unsubscribeCmd),
		pubsub,
	}
	for _, c := range cmds {
		c.spec.Group = "connection"
	}
	cmds = append(cmds, configCommand(), slowlogCommand(), latencyCommand(), aclCommand(), sentinelCommand(), roleCommand(), clusterCommand(), askingCommand())
	for _, c := range cmds {
		switch c.spec.Name {
		case "readonly", "readwrite":
			c.spec.Group = "cluster"
		case "multi", "exec", "discard", "watch", "unwatch":
			c.spec.Group = "transactions"
		case "subscribe", "psubscribe", "unsubscribe", "punsubscribe", "ssubscribe", "sunsubscribe", "pubsub":
			c.spec.Group = "pubsub"
		}
	}
	for _, name := range []string{"time", "info"} {
		for _, c := range cmds {
			if c.spec.Name == name {
				c.spec.Group = "server"
				c.tips = []string{"nondeterministic_output"}
			}
		}
	}
	cmdCmd.spec.Group = "server"
	slices.SortFunc(cmds, func(a, b *command) int { return strings.Compare(a.spec.Name, b.spec.Name) })
	return cmds
}

// buildTable fills s.cmds from the connection commands and Config.Commands.
func (s *Server) buildTable() {
	s.cmds = make(map[string]*command)
	s.conn = connCommands()
	for _, sp := range s.table.Specs() {
		if sp == nil {
			continue
		}
		c := &command{spec: *sp, since: "1.0.0"}
		c.spec.Name = strings.ToLower(sp.Name)
		c.acl = aclCategories(sp)
		s.cmds[c.spec.Name] = c
	}
	for _, c := range s.conn {
		s.cmds[c.spec.Name] = c // connection commands win over a clash
	}
	// COMMAND INFO's categories (and COMMAND LIST FILTERBY ACLCAT) are
	// those the ACL checks use (Redis's command table, kvorum's own
	// commands added), not ones derived from the spec: SORT is @set,
	// @sortedset, @list and @dangerous, not @keyspace, BLPOP is
	// @blocking, EVAL is not @write.
	aclCmds := s.users().Commands()
	for _, c := range s.cmds {
		for _, x := range append([]*command{c}, c.subs...) {
			if ac := aclCmds.LookupName(x.spec.Name); ac != nil {
				x.acl = x.acl[:0:0]
				for _, n := range ac.Categories.Names() {
					x.acl = append(x.acl, "@"+n)
				}
			}
		}
	}
	for name, c := range s.cmds {
		c.calls = s.m.cmds.WithLabelValues(name)
		c.latency = s.m.latency.WithLabelValues(name)
		c.setFlags()
		for _, sc := range c.subs {
			sc.calls, sc.latency = c.calls, c.latency
			sc.setFlags()
		}
	}
}

// groupACL is the ACL category of the commands of a group (cmdspec.Spec's
// Group, lower case).
var groupACL = map[string]string{
	"generic": "@keyspace", "keyspace": "@keyspace", "server": "@keyspace",
	"string": "@string", "hash": "@hash", "list": "@list", "set": "@set",
	"sorted_set": "@sortedset", "sorted-set": "@sortedset", "zset": "@sortedset", "sortedset": "@sortedset",
	"bitmap": "@bitmap", "hyperloglog": "@hyperloglog", "geo": "@geo",
	"stream": "@stream", "scripting": "@scripting",
}

// aclCategories derives Redis ACL categories for a data command.
func aclCategories(sp *cmdspec.Spec) []string {
	var acl []string
	if sp.Write {
		acl = append(acl, "@write")
	} else {
		acl = append(acl, "@read")
	}
	if cat, ok := groupACL[strings.ToLower(sp.Group)]; ok {
		acl = append(acl, cat)
	}
	if slices.Contains(sp.Flags, "fast") {
		acl = append(acl, "@fast")
	} else {
		acl = append(acl, "@slow")
	}
	return acl
}

func wrongArgs(name string) reply.Reply {
	return reply.Error("ERR wrong number of arguments for '" + name + "' command")
}

func arityOK(arity, n int) bool {
	if arity >= 0 {
		return n == arity
	}
	return n >= -arity
}

// connCommand runs a connection command after Redis's arity check.
func (c *conn) connCommand(cmd *command, args [][]byte) reply.Reply {
	if !arityOK(cmd.spec.Arity, len(args)) {
		return wrongArgs(cmd.spec.Name)
	}
	return cmd.handler(c, args)
}

// containerHandler dispatches a container command's subcommands with
// Redis's errors for unknown subcommands and wrong arity.
func containerHandler(parent *command) func(c *conn, args [][]byte) reply.Reply {
	upper := strings.ToUpper(parent.spec.Name)
	return func(c *conn, args [][]byte) reply.Reply {
		var buf [32]byte
		name, ok := lower(&buf, args[1])
		if ok {
			for _, sc := range parent.subs {
				if sc.spec.Name[len(parent.spec.Name)+1:] == string(name) {
					if !arityOK(sc.spec.Arity, len(args)) {
						return wrongArgs(sc.spec.Name)
					}
					return sc.handler(c, args)
				}
			}
		}
		return reply.Error("ERR unknown subcommand '" + string(args[1][:min(len(args[1]), 128)]) + "'. Try " + upper + " HELP.")
	}
}

func eqFold(b []byte, s string) bool { return strings.EqualFold(string(b), s) }

var errSyntax = reply.Error("ERR syntax error")

func ping(c *conn, args [][]byte) reply.Reply {
	if c.inSubscribedRESP2() {
		// RESP2 subscribed mode: PING answers in the push format.
		msg := []byte{}
		if len(args) == 2 {
			msg = args[1]
		} else if len(args) > 2 {
			return wrongArgs("ping")
		}
		return reply.Array(reply.BulkString("pong"), reply.Bulk(msg))
	}
	switch len(args) {
	case 1:
		return reply.Status("PONG")
	case 2:
		return reply.Bulk(args[1])
	}
	return wrongArgs("ping")
}

func echo(c *conn, args [][]byte) reply.Reply { return reply.Bulk(args[1]) }

func hello(c *conn, args [][]byte) reply.Reply {
	ver := int64(0)
	i := 1
	if len(args) >= 2 {
		v, ok := codec.ParseInt(args[1])
		if !ok {
			return reply.Error("ERR Protocol version is not an integer or out of range")
		}
		if v < 2 || v > 3 {
			return reply.Error("NOPROTO unsupported protocol version")
		}
		ver, i = v, 2
	}
	var user, pass []byte
	var name []byte
	setName := false
	for ; i < len(args); i++ {
		more := len(args) - 1 - i
		switch {
		case eqFold(args[i], "AUTH") && more >= 2:
			user, pass = args[i+1], args[i+2]
			i += 2
		case eqFold(args[i], "SETNAME") && more >= 1:
			name, setName = args[i+1], true
			if !validName(name) {
				return reply.Error("ERR Client names cannot contain spaces, newlines or special characters.")
			}
			i++
		default:
			return reply.Error("ERR Syntax error in HELLO option '" + string(args[i][:min(len(args[i]), 128)]) + "'")
		}
	}
	if user != nil {
		if r, ok := c.authenticate(string(user), string(pass), args[0]); !ok {
			return r
		}
	}
	if !c.authed {
		return reply.Error(acl.ErrHelloNoAuth)
	}
	if setName {
		c.setName(string(name))
	}
	if ver != 0 {
		c.setProto(int(ver))
	}
	return reply.Map(
		reply.BulkString("server"), reply.BulkString("redis"),
		reply.BulkString("version"), reply.BulkString(RedisVersion),
		reply.BulkString("proto"), reply.Int(int64(c.proto)),
		reply.BulkString("id"), reply.Int(int64(c.id)),
		reply.BulkString("mode"), reply.BulkString("standalone"),
		reply.BulkString("role"), reply.BulkString("master"),
		reply.BulkString("modules"), reply.Array(),
	)
}

func selectDB(c *conn, args [][]byte) reply.Reply {
	v, ok := codec.ParseInt(args[1])
	if !ok || v < -1<<31 || v > 1<<31-1 {
		return reply.Error("ERR value is not an integer or out of range")
	}
	if v != 0 {
		return reply.Error("ERR DB index is out of range")
	}
	return reply.OK
}

func quit(c *conn, args [][]byte) reply.Reply {
	c.closeAfter = true
	return reply.OK
}

// readOnlyCmd: READONLY. As on a Redis Cluster replica, the connection
// accepts that its reads are served by this node from its own state: no
// read barrier, so a read may miss writes the leader acknowledged but this
// node has not applied yet (never more than that: the state is always a
// prefix of the log). Writes and WATCH stay linearizable. READWRITE or
// RESET undoes it.
func readOnlyCmd(c *conn, args [][]byte) reply.Reply {
	c.readOnly = true
	return reply.OK
}

func readWriteCmd(c *conn, args [][]byte) reply.Reply {
	c.readOnly = false
	return reply.OK
}

func reset(c *conn, args [][]byte) reply.Reply {
	c.readOnly, c.clusterAware = false, false
	c.tx.reset()
	c.dropSubscriptions()
	c.setProto(2)
	c.setName("")
	c.initialUser()
	return reply.Status("RESET")
}

func timeCmd(c *conn, args [][]byte) reply.Reply {
	now := time.Now()
	return reply.Array(
		reply.BulkString(strconv.FormatInt(now.Unix(), 10)),
		reply.BulkString(strconv.Itoa(now.Nanosecond()/1000)),
	)
}

func (c *conn) setProto(p int) {
	c.proto = p
	c.protoVersion.Store(int32(p))
}

func (c *conn) setName(name string) {
	c.info.Lock()
	c.info.name = name
	c.info.Unlock()
}

// validName is Redis's rule for client names and library attributes:
// printable ASCII without spaces.
func validName(b []byte) bool {
	for _, ch := range b {
		if ch < '!' || ch > '~' {
			return false
		}
	}
	return true
}

// ---- CLIENT ----

func clientID(c *conn, args [][]byte) reply.Reply { return reply.Int(int64(c.id)) }

func clientSetName(c *conn, args [][]byte) reply.Reply {
	if !validName(args[2]) {
		return reply.Error("ERR Client names cannot contain spaces, newlines or special characters.")
	}
	c.setName(string(args[2]))
	return reply.OK
}

func clientGetName(c *conn, args [][]byte) reply.Reply {
	c.info.Lock()
	name := c.info.name
	c.info.Unlock()
	if name == "" {
		return reply.Nil
	}
	return reply.BulkString(name)
}

func clientSetInfo(c *conn, args [][]byte) reply.Reply {
	var attr string
	switch {
	case eqFold(args[2], "lib-name"):
		attr = "lib-name"
	case eqFold(args[2], "lib-ver"):
		attr = "lib-ver"
	default:
		return reply.Error("ERR Unrecognized option '" + string(args[2][:min(len(args[2]), 128)]) + "'")
	}
	if !validName(args[3]) {
		return reply.Error("ERR " + attr + " cannot contain spaces, newlines or special characters.")
	}
	c.info.Lock()
	if attr == "lib-name" {
		c.info.libName = string(args[3])
	} else {
		c.info.libVer = string(args[3])
	}
	c.info.Unlock()
	return reply.OK
}

// clientOnOff accepts CLIENT NO-EVICT / NO-TOUCH ON|OFF; kvorum neither
// evicts clients nor tracks key access, so both are no-ops.
func clientOnOff(c *conn, args [][]byte) reply.Reply {
	if eqFold(args[2], "on") || eqFold(args[2], "off") {
		return reply.OK
	}
	return errSyntax
}

// clientReply is CLIENT REPLY ON|OFF|SKIP, as Redis: OFF silences every
// reply from its own on, SKIP its own and the next command's (not under
// OFF), ON ends both and answers OK. A silenced reply is still counted
// (INFO) and its command still runs.
func clientReply(c *conn, args [][]byte) reply.Reply {
	switch {
	case eqFold(args[2], "on"):
		c.replyOff, c.skipNext, c.muteThis = false, false, false
		return reply.OK
	case eqFold(args[2], "off"):
		c.replyOff, c.muteThis = true, true
		return reply.OK
	case eqFold(args[2], "skip"):
		if !c.replyOff {
			c.skipNext = true
		}
		c.muteThis = true
		return reply.OK
	}
	return errSyntax
}

func clientHelp(c *conn, args [][]byte) reply.Reply {
	return helpReply("CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"GETNAME",
		"    Return the name of the current connection.",
		"ID",
		"    Return the ID of the current connection.",
		"INFO",
		"    Return information about the current client connection.",
		"LIST [options ...]",
		"    Return information about client connections. Options:",
		"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
		"      Return clients of specified type.",
		"    * ID <client-id> [<client-id> ...]",
		"      Return clients with the specified IDs.",
		"SETNAME <name>",
		"    Assign the name <name> to the current connection.",
		"SETINFO <option> <value>",
		"    Set client meta attr. Options are:",
		"    * LIB-NAME: the client lib name.",
		"    * LIB-VER: the client lib version.",
		"NO-EVICT (ON|OFF)",
		"    Accepted for compatibility; kvorum does not evict clients.",
		"NO-TOUCH (ON|OFF)",
		"    Accepted for compatibility; kvorum does not track key access.",
		"REPLY (ON|OFF|SKIP)",
		"    Control the replies sent to the current connection.",
		"UNBLOCK <clientid> [TIMEOUT|ERROR]",
		"    Unblock the specified blocked client.",
		"HELP",
		"    Print this help.")
}

func helpReply(lines ...string) reply.Reply {
	elems := make([]reply.Reply, len(lines))
	for i, l := range lines {
		elems[i] = reply.Status(l)
	}
	return reply.Array(elems...)
}

func clientInfo(c *conn, args [][]byte) reply.Reply {
	return reply.Reply{Kind: reply.KindVerbatim, Str: c.appendInfoLine(nil, time.Now())}
}

func clientList(c *conn, args [][]byte) reply.Reply {
	var ids []uint64
	for i := 2; i < len(args); i++ {
		switch {
		case eqFold(args[i], "TYPE") && i+1 < len(args):
			t := strings.ToLower(string(args[i+1]))
			switch t {
			case "normal":
			case "master", "replica", "slave", "pubsub":
				return reply.Reply{Kind: reply.KindVerbatim, Str: []byte{}}
			default:
				return reply.Error("ERR Unknown client type '" + string(args[i+1][:min(len(args[i+1]), 128)]) + "'")
			}
			i++
		case eqFold(args[i], "ID") && i+1 < len(args):
			for i++; i < len(args); i++ {
				v, ok := codec.ParseInt(args[i])
				if !ok || v <= 0 {
					return reply.Error("ERR Invalid client ID")
				}
				ids = append(ids, uint64(v))
			}
		default:
			return errSyntax
		}
	}
	s := c.s
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for o := range s.conns {
		if ids == nil || slices.Contains(ids, o.id) {
			conns = append(conns, o)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(conns, func(a, b *conn) int { return cmp.Compare(a.id, b.id) })
	now := time.Now()
	var b []byte
	for _, o := range conns {
		b = o.appendInfoLine(b, now)
	}
	if b == nil {
		b = []byte{}
	}
	return reply.Reply{Kind: reply.KindVerbatim, Str: b}
}

// appendInfoLine appends the connection's CLIENT LIST line (Redis 7.2's
// fields; memory fields kvorum does not track are 0).
func (c *conn) appendInfoLine(b []byte, now time.Time) []byte {
	c.info.Lock()
	name, libName, libVer := c.info.name, c.info.libName, c.info.libVer
	c.info.Unlock()
	cmd := "NULL"
	if lc := c.lastCmd.Load(); lc != nil {
		cmd = lc.spec.Name
	}
	proto := c.protoVersion.Load()
	if proto == 0 {
		proto = 2
	}
	idle := now.Sub(time.Unix(0, c.lastActive.Load()))
	b = append(b, "id="...)
	b = strconv.AppendUint(b, c.id, 10)
	b = append(b, " addr="...)
	b = append(b, c.addr...)
	b = append(b, " laddr="...)
	b = append(b, c.laddr...)
	b = append(b, " fd=-1 name="...)
	b = append(b, name...)
	b = append(b, " age="...)
	b = strconv.AppendInt(b, int64(now.Sub(c.created)/time.Second), 10)
	b = append(b, " idle="...)
	b = strconv.AppendInt(b, int64(idle/time.Second), 10)
	b = append(b, " flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd="...)
	b = append(b, cmd...)
	b = append(b, " user="...)
	b = append(b, c.userName()...)
	b = append(b, " redir=-1 resp="...)
	b = strconv.AppendInt(b, int64(proto), 10)
	b = append(b, " lib-name="...)
	b = append(b, libName...)
	b = append(b, " lib-ver="...)
	b = append(b, libVer...)
	return append(b, '\n')
}

// ---- COMMAND ----

func (s *Server) topLevel() []*command {
	out := make([]*command, 0, len(s.cmds))
	for _, c := range s.cmds {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *command) int { return strings.Compare(a.spec.Name, b.spec.Name) })
	return out
}

func (s *Server) find(name []byte) *command {
	n := strings.ToLower(string(name))
	if parent, sub, ok := strings.Cut(n, "|"); ok {
		p := s.cmds[parent]
		if p == nil {
			return nil
		}
		for _, sc := range p.subs {
			if sc.spec.Name == parent+"|"+sub {
				return sc
			}
		}
		return nil
	}
	return s.cmds[n]
}

// commandInfos is the COMMAND (INFO) reply: all commands, or the named ones
// (nil for unknown names).
func (s *Server) commandInfos(names [][]byte) reply.Reply {
	if names == nil {
		all := s.topLevel()
		elems := make([]reply.Reply, len(all))
		for i, c := range all {
			elems[i] = c.infoReply()
		}
		return reply.Array(elems...)
	}
	elems := make([]reply.Reply, len(names))
	for i, n := range names {
		if c := s.find(n); c != nil {
			elems[i] = c.infoReply()
		} else {
			elems[i] = reply.Nil
		}
	}
	return reply.Array(elems...)
}

func statusSet(ss []string) reply.Reply {
	elems := make([]reply.Reply, len(ss))
	for i, s := range ss {
		elems[i] = reply.Status(s)
	}
	return reply.Reply{Kind: reply.KindSet, Elems: elems}
}

func bulkSet(ss []string) reply.Reply {
	elems := make([]reply.Reply, len(ss))
	for i, s := range ss {
		elems[i] = reply.BulkString(s)
	}
	return reply.Reply{Kind: reply.KindSet, Elems: elems}
}

// infoReply is one command's entry in COMMAND / COMMAND INFO, in Redis 7's
// ten-element form.
func (c *command) infoReply() reply.Reply {
	sp := &c.spec
	first, last, step := sp.FirstKey, sp.LastKey, sp.Step
	keySpecs := reply.Reply{Kind: reply.KindSet}
	if specs, ok := cmdspec.RedisKeySpecs[sp.Name]; ok {
		for _, ks := range specs {
			keySpecs.Elems = append(keySpecs.Elems, keySpecReply(ks))
		}
	} else if first > 0 {
		flags := []string{"RO", "access"}
		if sp.Write {
			flags = []string{"RW", "update"}
		}
		rel := last
		if last >= 0 {
			rel = last - first
		}
		keySpecs.Elems = []reply.Reply{reply.Map(
			reply.BulkString("flags"), statusSet(flags),
			reply.BulkString("begin_search"), reply.Map(
				reply.BulkString("type"), reply.BulkString("index"),
				reply.BulkString("spec"), reply.Map(reply.BulkString("index"), reply.Int(int64(first))),
			),
			reply.BulkString("find_keys"), reply.Map(
				reply.BulkString("type"), reply.BulkString("range"),
				reply.BulkString("spec"), reply.Map(
					reply.BulkString("lastkey"), reply.Int(int64(rel)),
					reply.BulkString("keystep"), reply.Int(int64(step)),
					reply.BulkString("limit"), reply.Int(0),
				),
			),
		)}
	}
	subs := make([]reply.Reply, len(c.subs))
	for i, sc := range c.subs {
		subs[i] = sc.infoReply()
	}
	return reply.Array(
		reply.BulkString(sp.Name),
		reply.Int(int64(sp.Arity)),
		statusSet(sp.Flags),
		reply.Int(int64(first)),
		reply.Int(int64(last)),
		reply.Int(int64(step)),
		statusSet(c.acl),
		bulkSet(c.tips),
		keySpecs,
		reply.Reply{Kind: reply.KindSet, Elems: subs},
	)
}

// docsReply is one command's COMMAND DOCS map: enough for redis-cli's
// help and hints (no argument descriptions).
func (c *command) docsReply() reply.Reply {
	group := c.spec.Group
	if group == "" {
		group = "generic"
	}
	summary := c.spec.Summary
	if summary == "" {
		summary = strings.ToUpper(c.spec.Name) + " command"
	}
	elems := []reply.Reply{
		reply.BulkString("summary"), reply.BulkString(summary),
		reply.BulkString("since"), reply.BulkString(c.since),
		reply.BulkString("group"), reply.BulkString(group),
	}
	if len(c.subs) > 0 {
		subs := make([]reply.Reply, 0, 2*len(c.subs))
		for _, sc := range c.subs {
			subs = append(subs, reply.BulkString(sc.spec.Name), sc.docsReply())
		}
		elems = append(elems, reply.BulkString("subcommands"), reply.Map(subs...))
	}
	return reply.Map(elems...)
}

func commandCount(c *conn, args [][]byte) reply.Reply { return reply.Int(int64(len(c.s.cmds))) }

func commandInfoCmd(c *conn, args [][]byte) reply.Reply {
	if len(args) == 2 {
		return c.s.commandInfos(nil)
	}
	return c.s.commandInfos(args[2:])
}

func commandDocs(c *conn, args [][]byte) reply.Reply {
	var cmds []*command
	if len(args) == 2 {
		cmds = c.s.topLevel()
	} else {
		for _, n := range args[2:] {
			if cmd := c.s.find(n); cmd != nil {
				cmds = append(cmds, cmd)
			}
		}
	}
	elems := make([]reply.Reply, 0, 2*len(cmds))
	for _, cmd := range cmds {
		elems = append(elems, reply.BulkString(cmd.spec.Name), cmd.docsReply())
	}
	return reply.Map(elems...)
}

// commandList is COMMAND LIST [FILTERBY ACLCAT cat | PATTERN glob]: names
// of all commands and subcommands.
func commandList(c *conn, args [][]byte) reply.Reply {
	keep := func(*command) bool { return true }
	if len(args) > 2 {
		if len(args) != 5 || !eqFold(args[2], "FILTERBY") {
			return errSyntax
		}
		arg := strings.ToLower(string(args[4]))
		switch {
		case eqFold(args[3], "ACLCAT"):
			keep = func(cmd *command) bool { return slices.Contains(cmd.acl, "@"+arg) }
		case eqFold(args[3], "PATTERN"):
			keep = func(cmd *command) bool { return glob.Match([]byte(arg), []byte(cmd.spec.Name), true) }
		case eqFold(args[3], "MODULE"):
			keep = func(*command) bool { return false }
		default:
			return errSyntax
		}
	}
	var elems []reply.Reply
	for _, cmd := range c.s.topLevel() {
		if keep(cmd) {
			elems = append(elems, reply.BulkString(cmd.spec.Name))
		}
		for _, sc := range cmd.subs {
			if keep(sc) {
				elems = append(elems, reply.BulkString(sc.spec.Name))
			}
		}
	}
	return reply.Array(elems...)
}

// commandGetKeys is COMMAND GETKEYS cmd arg...: the keys by the command's
// first/last/step key positions.
// commandGetKeys is COMMAND GETKEYS, with Redis 7.0's checks in its
// order (getKeysSubcommandImpl): a known command, one that has keys, its
// arity, then at least one key found unless the command may have none.
func commandGetKeys(c *conn, args [][]byte) reply.Reply {
	cmd := c.s.lookup(args[2])
	if cmd == nil {
		return reply.Error("ERR Invalid command specified")
	}
	withFlags := len(args[1]) == len("getkeysandflags")
	argv := args[2:]
	if !cmdspec.HasKeys(&cmd.spec, argv) {
		return reply.Error("ERR The command has no key arguments")
	}
	if !arityOK(cmd.spec.Arity, len(argv)) {
		return reply.Error("ERR Invalid number of arguments specified for command")
	}
	found, optional := cmdspec.KeyRefs(&cmd.spec, argv)
	if len(found) == 0 && !optional {
		return reply.Error("ERR Invalid arguments specified for command")
	}
	keys := make([]reply.Reply, len(found))
	for i, k := range found {
		keys[i] = reply.Bulk(argv[k.Pos])
		if withFlags {
			keys[i] = reply.Array(keys[i], statusSet(k.Flags))
		}
	}
	return reply.Array(keys...)
}

func commandHelp(c *conn, args [][]byte) reply.Reply {
	return helpReply("COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"(no subcommand)",
		"    Return details about all commands.",
		"COUNT",
		"    Return the total number of commands in this server.",
		"LIST",
		"    Return a list of all commands in this server.",
		"INFO [<command-name> ...]",
		"    Return details about multiple commands.",
		"    If no command names are given, documentation details for all",
		"    commands are returned.",
		"DOCS [<command-name> ...]",
		"    Return documentation details about multiple commands.",
		"    If no command names are given, documentation details for all",
		"    commands are returned.",
		"GETKEYS <full-command>",
		"    Return the keys from a full command.",
		"HELP",
		"    Print this help.")
}

// ---- INFO ----

func info(c *conn, args [][]byte) reply.Reply {
	s := c.s
	// Which sections: none named, or "default", is Redis's default set;
	// "all" and "everything" add Commandstats; names pick sections.
	want := map[string]bool{}
	dflt, every := len(args) == 1, false
	for _, a := range args[1:] {
		n := strings.ToLower(string(a))
		switch n {
		case "all", "everything":
			every = true
		case "default":
			dflt = true
		}
		want[n] = true
	}
	picked := func(name string) bool {
		n := strings.ToLower(name)
		return every || want[n] || dflt && n != "commandstats" && n != "latencystats"
	}
	now := time.Now()
	up := now.Sub(s.started)
	i64 := func(v int64) string { return strconv.FormatInt(v, 10) }
	u64 := func(v uint64) string { return strconv.FormatUint(v, 10) }
	exe, _ := os.Executable()
	sections := map[string][][2]string{}
	sections["Server"] = [][2]string{
		{"redis_version", RedisVersion},
		{"redis_git_sha1", "00000000"},
		{"redis_git_dirty", "0"},
		{"redis_mode", "standalone"},
		{"kvorum_version", s.cfg.Version},
		{"kvorum_node_id", u64(s.cfg.NodeID)},
		{"os", runtime.GOOS + " " + runtime.GOARCH},
		{"arch_bits", strconv.Itoa(strconv.IntSize)},
		{"multiplexing_api", "goroutines"},
		{"go_version", runtime.Version()},
		{"process_id", strconv.Itoa(os.Getpid())},
		{"run_id", s.runID},
		{"tcp_port", i64(s.port.Load())},
		{"server_time_usec", i64(now.UnixMicro())},
		{"uptime_in_seconds", i64(int64(up / time.Second))},
		{"uptime_in_days", i64(int64(up / (24 * time.Hour)))},
		{"executable", exe},
	}
	if picked("clients") {
		sections["Clients"] = [][2]string{
			{"connected_clients", i64(s.clients.Load())},
			{"maxclients", i64(s.maxClients.Load())},
			{"tracking_clients", "0"}, // the backend adds blocked_clients
		}
	}
	if picked("memory") {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		rss, ok := residentBytes()
		if !ok {
			rss = ms.Sys
		}
		sections["Memory"] = [][2]string{
			{"used_memory", u64(ms.HeapAlloc)},
			{"used_memory_human", bytesToHuman(ms.HeapAlloc)},
			{"used_memory_rss", u64(rss)},
			{"used_memory_rss_human", bytesToHuman(rss)},
			{"number_of_cached_scripts", "0"}, // the backend's count replaces it
			{"maxmemory", i64(s.maxMemory())},
			{"maxmemory_human", bytesToHuman(uint64(s.maxMemory()))}, //nolint:gosec // never negative
			{"maxmemory_policy", "noeviction"},
			{"mem_allocator", "go"},
			{"go_heap_objects", u64(ms.HeapObjects)},
			{"go_gc_cycles", strconv.FormatUint(uint64(ms.NumGC), 10)},
		}
	}
	sections["Stats"] = s.statsFields()
	sections["CPU"] = cpuFields()
	sections["Modules"] = [][2]string{}
	if picked("commandstats") {
		sections["Commandstats"] = s.commandStatsFields()
	}
	sections["Errorstats"] = s.errs.fields()
	if picked("latencystats") {
		sections["Latencystats"] = s.latencyStatsFields()
	}
	// cluster.go: CLUSTER SLOTS and -MOVED for cluster clients.
	sections["Cluster"] = [][2]string{{"cluster_enabled", "1"}}
	var extra []string // the backend's sections Redis does not have
	if s.b != nil {
		for _, sec := range s.b.Info() {
			if _, ok := sections[sec.Name]; !ok && !slices.Contains(infoOrder, sec.Name) {
				extra = append(extra, sec.Name)
			}
			sections[sec.Name] = mergeFields(sections[sec.Name], sec.Fields)
		}
	}
	var b []byte
	for _, name := range append(slices.Clip(infoOrder), extra...) {
		fields, ok := sections[name]
		if !ok || !picked(name) {
			continue
		}
		if len(b) > 0 {
			b = append(b, "\r\n"...)
		}
		b = append(b, "# "...)
		b = append(b, name...)
		b = append(b, "\r\n"...)
		for _, f := range fields {
			b = append(b, f[0]...)
			b = append(b, ':')
			b = append(b, f[1]...)
			b = append(b, "\r\n"...)
		}
	}
	if b == nil {
		b = []byte{}
	}
	return reply.Reply{Kind: reply.KindVerbatim, Str: b}
}

// infoOrder is the order of INFO's sections, Redis 7.0's (genRedisInfoString).
var infoOrder = []string{"Server", "Clients", "Memory", "Persistence", "Stats", "Replication",
	"CPU", "Modules", "Commandstats", "Errorstats", "Latencystats", "Cluster", "Keyspace"}

// bytesToHuman formats n like Redis's INFO *_human fields.
func bytesToHuman(n uint64) string {
	const k = 1024.0
	f := float64(n)
	switch {
	case n < 1024:
		return strconv.FormatUint(n, 10) + "B"
	case f < k*k:
		return strconv.FormatFloat(f/k, 'f', 2, 64) + "K"
	case f < k*k*k:
		return strconv.FormatFloat(f/(k*k), 'f', 2, 64) + "M"
	case f < k*k*k*k:
		return strconv.FormatFloat(f/(k*k*k), 'f', 2, 64) + "G"
	default:
		return strconv.FormatFloat(f/(k*k*k*k), 'f', 2, 64) + "T"
	}
}
