package resp

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvorum/kvorum/internal/acl"
	"github.com/kvorum/kvorum/internal/reply"
)

// The ACL command. Reading subcommands (WHOAMI, LIST, USERS, GETUSER,
// CAT, DRYRUN, GENPASS) answer from this node's users, which follow the
// applied log. Changes (SETUSER, DELUSER, LOAD) are made on a copy of the
// cluster's users read at a linearizable point, with Redis's checks and
// errors, and the resulting users are proposed whole (KVORUM.ACL SET,
// compare-and-set on the version read: a concurrent change makes the
// node read again and retry); the reply waits until this node has
// applied the change, so that the client's next command sees it here.
// ACL LOG and ACL SAVE are this node's (its denials; its --aclfile).

func aclCommand() *command {
	admin := []string{"admin", "noscript", "loading", "stale"}
	adminACL := []string{"@admin", "@slow", "@dangerous"}
	plain := []string{"noscript", "loading", "stale"}
	slow := []string{"@slow"}
	sub := func(name string, arity int, flags, cats []string, since, summary string, h func(c *conn, args [][]byte) reply.Reply) *command {
		return connCmd("acl|"+name, arity, flags, cats, since, summary, h)
	}
	a := connCmd("acl", -2, nil, slow, "6.0.0", "A container for Access List Control commands ", nil)
	a.subs = []*command{
		sub("cat", -2, plain, slow, "6.0.0", "List the ACL categories or the commands inside a category", aclCat),
		sub("deluser", -3, admin, adminACL, "6.0.0", "Remove the specified ACL users and the associated rules", aclDelUser),
		sub("dryrun", -4, admin, adminACL, "7.0.0", "Returns whether the user can execute the given command without executing the command.", aclDryRun),
		sub("genpass", -2, plain, slow, "6.0.0", "Generate a pseudorandom secure password to use for ACL users", aclGenPass),
		sub("getuser", 3, admin, adminACL, "6.0.0", "Get the rules for a specific ACL user", aclGetUser),
		sub("help", 2, []string{"loading", "stale"}, slow, "6.0.0", "Show helpful text about the different subcommands", aclHelp),
		sub("list", 2, admin, adminACL, "6.0.0", "List the current ACL rules in ACL config file format", aclList),
		sub("load", 2, admin, adminACL, "6.0.0", "Reload the ACLs from the configured ACL file", aclLoad),
		sub("log", -2, admin, adminACL, "6.0.0", "List latest events denied because of ACLs in place", aclLog),
		sub("save", 2, admin, adminACL, "6.0.0", "Save the current ACL rules in the configured ACL file", aclSave),
		sub("setuser", -3, admin, adminACL, "6.0.0", "Modify or create the rules for a specific ACL user", aclSetUser),
		sub("users", 2, admin, adminACL, "6.0.0", "List the username of all the configured ACL rules", aclUsers),
		sub("whoami", 2, plain, slow, "6.0.0", "Return the name of the user associated to the current connection", aclWhoAmI),
	}
	a.handler = containerHandler(a)
	a.spec.Group = "server"
	for _, sc := range a.subs {
		sc.spec.Group = "server"
	}
	return a
}

func aclHelp(c *conn, args [][]byte) reply.Reply {
	return helpReply("ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"CAT [<category>]",
		"    List all commands that belong to <category>, or all command categories",
		"    when no category is specified.",
		"DELUSER <username> [<username> ...]",
		"    Delete a list of users.",
		"DRYRUN <username> <command> [<arg> ...]",
		"    Returns whether the user can execute the given command without executing the command.",
		"GETUSER <username>",
		"    Get the user's details.",
		"GENPASS [<bits>]",
		"    Generate a secure 256-bit user password. The optional `bits` argument can",
		"    be used to specify a different size.",
		"LIST",
		"    Show users details in config file format.",
		"LOAD",
		"    Reload users from the ACL file.",
		"LOG [<count> | RESET]",
		"    Show the ACL log entries.",
		"SAVE",
		"    Save the current config to the ACL file.",
		"SETUSER <username> <attribute> [<attribute> ...]",
		"    Create or modify a user with the specified attributes.",
		"USERS",
		"    List all the registered usernames.",
		"WHOAMI",
		"    Return the current connection username.",
		"HELP",
		"    Prints this help.")
}

// aclError is an acl package error as a reply (its text carries the
// code).
func aclError(err error) reply.Reply {
	var e *acl.Error
	if errors.As(err, &e) {
		return reply.Error(e.Text)
	}
	return reply.Error("ERR " + err.Error())
}

func strs(ss []string) reply.Reply {
	out := make([]reply.Reply, len(ss))
	for i, s := range ss {
		out[i] = reply.BulkString(s)
	}
	return reply.Array(out...)
}

func aclWhoAmI(c *conn, args [][]byte) reply.Reply { return reply.BulkString(c.userName()) }

// aclRead makes the reading subcommands linearizable: they answer once
// this node has applied every change of the users committed before them
// (a read barrier; a change made through another node a moment ago is
// seen), as reads of keys do.
func aclRead(c *conn) { c.s.syncUsers(c) }

func aclList(c *conn, args [][]byte) reply.Reply {
	aclRead(c)
	return strs(c.s.users().Lines())
}

func aclUsers(c *conn, args [][]byte) reply.Reply {
	aclRead(c)
	return strs(c.s.users().Usernames())
}

func aclCat(c *conn, args [][]byte) reply.Reply {
	if len(args) > 3 {
		return wrongArgs("acl|cat")
	}
	var cat []string
	if len(args) == 3 {
		cat = []string{string(args[2])}
	}
	names, err := c.s.users().Cat(cat...)
	if err != nil {
		return aclError(err)
	}
	return strs(names)
}

func aclGenPass(c *conn, args [][]byte) reply.Reply {
	if len(args) > 3 {
		return wrongArgs("acl|genpass")
	}
	bits := int64(256)
	if len(args) == 3 {
		n, err := strconv.ParseInt(string(args[2]), 10, 64)
		if err != nil {
			return reply.Error("ERR value is not an integer or out of range")
		}
		bits = n
	}
	p, err := acl.GenPass(bits)
	if err != nil {
		return aclError(err)
	}
	return reply.BulkString(p)
}

func aclGetUser(c *conn, args [][]byte) reply.Reply {
	aclRead(c)
	u := c.s.users().User(string(args[2]))
	if u == nil {
		return reply.Nil
	}
	info := u.Info()
	b := reply.BulkString
	sel := func(s acl.SelectorInfo) []reply.Reply {
		return []reply.Reply{b("commands"), b(s.Commands), b("keys"), b(s.Keys), b("channels"), b(s.Channels)}
	}
	sels := make([]reply.Reply, len(info.Selectors))
	for i, s := range info.Selectors {
		sels[i] = reply.Map(sel(s)...)
	}
	kv := []reply.Reply{b("flags"), bulkSet(info.Flags), b("passwords"), strs(info.Passwords)}
	kv = append(kv, sel(info.SelectorInfo)...)
	kv = append(kv, b("selectors"), reply.Array(sels...))
	return reply.Map(kv...)
}

func aclDryRun(c *conn, args [][]byte) reply.Reply {
	aclRead(c)
	denied, err := c.s.users().DryRun(args[2:], &KeyBuffer{})
	switch {
	case err != nil:
		return aclError(err)
	case denied == "":
		return reply.OK
	}
	return reply.BulkString(denied)
}

func aclLog(c *conn, args [][]byte) reply.Reply {
	if len(args) > 3 {
		return wrongArgs("acl|log")
	}
	count := 10
	if len(args) == 3 {
		if eqFold(args[2], "reset") {
			c.s.aclLog.reset()
			return reply.OK
		}
		n, err := strconv.ParseInt(string(args[2]), 10, 64)
		if err != nil || n < 0 {
			return reply.Error("ERR value is out of range, must be positive")
		}
		count = int(min(n, 1<<20))
	}
	now := time.Now()
	entries := c.s.aclLog.entries(count)
	out := make([]reply.Reply, len(entries))
	b := reply.BulkString
	for i, e := range entries {
		out[i] = reply.Map(
			b("count"), reply.Int(e.Count),
			b("reason"), b(e.Reason.LogReason()),
			b("context"), b(e.Context.String()),
			b("object"), b(e.Object),
			b("username"), b(e.Username),
			b("age-seconds"), reply.Double(e.AgeSeconds(now)),
			b("client-info"), b(e.ClientInfo),
			b("entry-id"), reply.Int(e.ID),
			b("timestamp-created"), reply.Int(e.Created.UnixMilli()),
			b("timestamp-last-updated"), reply.Int(e.Updated.UnixMilli()),
		)
	}
	return reply.Array(out...)
}

func aclSetUser(c *conn, args [][]byte) reply.Reply {
	rules := make([]string, len(args)-3)
	for i, a := range args[3:] {
		rules[i] = string(a)
	}
	name := string(args[2])
	return c.aclChange(func(r *acl.Registry) error { return r.SetUser(name, rules...) }, reply.OK)
}

func aclDelUser(c *conn, args [][]byte) reply.Reply {
	names := make([]string, len(args)-2)
	for i, a := range args[2:] {
		names[i] = string(a)
	}
	var n int
	r := c.aclChange(func(r *acl.Registry) (err error) {
		n, err = r.DelUser(names...)
		return err
	}, reply.OK)
	if r.Kind == reply.KindError {
		return r
	}
	return reply.Int(int64(n))
}

func aclLoad(c *conn, args [][]byte) reply.Reply {
	file := c.s.cfg.ACLFile
	if file == "" {
		return reply.Error(acl.ErrNoACLFile)
	}
	content, err := os.ReadFile(file)
	if err != nil {
		return reply.Error("ERR Error loading ACLs, opening file '" + file + "': " + err.Error())
	}
	return c.aclChange(func(r *acl.Registry) error { return r.Load(file, content) }, reply.OK)
}

func aclSave(c *conn, args [][]byte) reply.Reply {
	file := c.s.cfg.ACLFile
	if file == "" {
		return reply.Error(acl.ErrNoACLFile)
	}
	aclRead(c)
	if err := writeFileAtomic(file, c.s.users().SaveFile()); err != nil {
		c.s.log.Warn("resp: ACL SAVE failed", "file", file, "err", err)
		return reply.Error("ERR There was an error trying to save the ACLs. Please check the server logs for more information")
	}
	return reply.OK
}

// writeFileAtomic writes data to a temporary file next to name, syncs it
// and renames it over name, as Redis's ACLSaveToFile does.
func writeFileAtomic(name string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(name), filepath.Base(name)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// ACLProposeCommand is the internal write that replaces the cluster's
// users (package kv's KVORUM.ACL).
const ACLProposeCommand = "KVORUM.ACL"

// aclAttempts bounds the retries of a change that raced another.
const aclAttempts = 8

// aclChange applies change to a copy of the cluster's users and proposes
// the result. A change's own error (Redis's text) is the reply; ok is the
// reply on success.
func (c *conn) aclChange(change func(r *acl.Registry) error, ok reply.Reply) reply.Reply {
	s := c.s
	for range aclAttempts {
		g := s.b.Do(c.ctx, [][][]byte{{[]byte(ACLProposeCommand), []byte("GET")}})[0]
		if g.Kind == reply.KindError {
			return g
		}
		if g.Kind != reply.KindArray || len(g.Elems) == 0 || g.Elems[0].Kind != reply.KindInt {
			return reply.Error("ERR internal error: malformed ACL state")
		}
		version := g.Elems[0].Int
		scratch := acl.NewRegistry(s.users().Commands())
		lines := make([]string, 0, len(g.Elems)-1)
		for _, e := range g.Elems[1:] {
			lines = append(lines, string(e.Str))
		}
		if version == 0 {
			// Never changed: the users the node started with.
			lines = s.users().Lines()
		}
		if err := scratch.SyncLines(lines); err != nil {
			return reply.Error("ERR internal error: the cluster's ACL users do not load: " + err.Error())
		}
		if err := change(scratch); err != nil {
			return aclError(err)
		}
		next := scratch.Lines()
		if err := replicable(scratch.Commands(), next); err != nil {
			return reply.Error("ERR " + err.Error())
		}
		cmd := make([][]byte, 0, 3+len(next))
		cmd = append(cmd, []byte(ACLProposeCommand), []byte("SET"), strconv.AppendInt(nil, version, 10))
		for _, l := range next {
			cmd = append(cmd, []byte(l))
		}
		p := s.b.Do(c.ctx, [][][]byte{cmd})[0]
		if p.Kind == reply.KindError {
			if strings.Contains(string(p.Str), "changed concurrently") {
				continue
			}
			return p
		}
		if p.Kind == reply.KindInt && !c.waitACL(uint64(p.Int)) { //nolint:gosec // a log index
			return reply.Error("UNCERTAIN the ACL change was applied by the cluster but this node has not applied it yet")
		}
		return ok
	}
	return reply.Error("ERR ACL users changed concurrently too often; try again")
}

// replicable checks that lines load back to themselves: what a replica
// rebuilds from them is what ACL LIST showed here (a rule with a line
// break would not be).
func replicable(cmds *acl.Commands, lines []string) error {
	for _, l := range lines {
		if strings.ContainsAny(l, "\r\n") {
			return errors.New("kvorum replicates users as ACL file lines: a rule cannot contain a line break")
		}
	}
	again := acl.NewRegistry(cmds)
	if err := again.SyncLines(lines); err != nil {
		return errors.New("kvorum replicates users as ACL file lines and these do not load back: " + err.Error())
	}
	if !slices.Equal(again.Lines(), lines) {
		return errors.New("kvorum replicates users as ACL file lines and these do not load back to the same users")
	}
	return nil
}

// waitACL waits until this node has applied the users' version v.
func (c *conn) waitACL(v uint64) bool {
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	for d := 100 * time.Microsecond; c.s.aclVersion() < v; d = min(2*d, 20*time.Millisecond) {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
		}
	}
	return true
}
