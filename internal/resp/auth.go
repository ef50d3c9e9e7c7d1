package resp

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kvorum/kvorum/internal/acl"
	"github.com/kvorum/kvorum/internal/cmdspec"
	"github.com/kvorum/kvorum/internal/reply"
)

// Authentication and ACL checks, as Redis's processCommand makes them: a
// command that is unknown or has the wrong number of arguments gets that
// error first; then a connection that has not authenticated gets NOAUTH
// for anything but AUTH, HELLO, QUIT and RESET; then the user's rules are
// checked (command, keys, channels) and a refusal is NOPERM, recorded in
// this node's ACL LOG. A connection starts as the default user,
// authenticated if that user is on and needs no password. Inside MULTI a
// refused command flags the transaction (EXEC aborts) and EXEC checks the
// queued commands again. A user that is allowed everything (the default
// user of a node without ACLs) is let through after one atomic load.

// ACLCommands is the command universe of kvorum's ACL rules: Redis's
// commands and kvorum's own (specs flagged Extension, e.g. LOCK and
// LEASE), whose categories follow their flags and group as Redis derives
// them, and Redis Sentinel's SENTINEL (sentinel.go), which every node
// answers.
func ACLCommands(specs []*cmdspec.Spec) *acl.Commands {
	var extra []acl.CommandSpec
	for _, s := range specs {
		if !s.Extension {
			continue
		}
		var cats acl.Category
		for _, f := range s.Flags {
			switch f {
			case "write":
				cats |= acl.CatWrite
			case "readonly":
				cats |= acl.CatRead
			case "admin":
				cats |= acl.CatAdmin | acl.CatDangerous
			case "pubsub":
				cats |= acl.CatPubsub
			case "fast":
				cats |= acl.CatFast
			case "blocking":
				cats |= acl.CatBlocking
			}
		}
		if cats&acl.CatFast == 0 {
			cats |= acl.CatSlow
		}
		if s.Name == "lock" {
			cats |= acl.CatBlocking // LOCK ACQUIRE waits
		}
		extra = append(extra, acl.CommandSpec{Name: s.Name, Arity: s.Arity, Categories: cats})
	}
	extra = append(extra, sentinelACLCommands()...)
	return acl.MustCommands(extra...)
}

// users is the node's ACL users.
func (s *Server) users() *acl.Registry { return s.cfg.Users }

// aclVersion is the version of the users this node has applied.
func (s *Server) aclVersion() uint64 {
	if f := s.cfg.ACLVersion; f != nil {
		return f()
	}
	return 1<<64 - 1
}

// UsersSyncer is a Backend whose node may lag behind the cluster's users:
// SyncUsers returns true once the node has applied every change
// committed before the call (a read barrier), false if it could not tell.
// A refused AUTH or command is checked again after it, so that a user or
// a permission made through another node a moment ago is known here as
// soon as its change was acknowledged.
type UsersSyncer interface {
	SyncUsers(ctx context.Context) bool
}

func (s *Server) syncUsers(c *conn) bool {
	us, ok := s.b.(UsersSyncer)
	return ok && us.SyncUsers(c.ctx)
}

// initialUser sets a new (or RESET) connection's user: the default user,
// authenticated if it is on and needs no password.
func (c *conn) initialUser() {
	def := c.s.users().Default()
	c.user.Store(def)
	c.authed = def.Enabled() && def.NoPass()
}

func (c *conn) userName() string {
	if u := c.user.Load(); u != nil {
		return u.Name()
	}
	return acl.DefaultUser
}

// aclRefusal is NOAUTH or NOPERM for args (of cmd, a known command), or
// refused=false if the connection may run it. ctx is the ACL LOG's
// context; atExec: EXEC checks a queued command again (its refusal is
// EXEC's text).
func (c *conn) aclRefusal(cmd *command, args [][]byte, ctx acl.Context, atExec bool) (r reply.Reply, refused bool) {
	u := c.user.Load()
	if c.authed && u.AllowsAll() {
		return reply.Reply{}, false
	}
	if !arityOK(cmd.spec.Arity, len(args)) {
		return reply.Reply{}, false // the arity error comes first
	}
	acmd := c.s.users().Commands().Lookup(args)
	if !c.authed {
		if acmd != nil && acmd.NoAuth {
			return reply.Reply{}, false
		}
		return reply.Error(acl.ErrNoAuth), true
	}
	if acmd == nil {
		return reply.Reply{}, false // the command's own error follows
	}
	d, pos := u.Check(acmd, args, &c.keys)
	if d != acl.Allowed && c.s.syncUsers(c) {
		// This node may not have applied a change that allows it yet.
		d, pos = u.Check(acmd, args, &c.keys)
	}
	if d == acl.Allowed {
		if inner := fencedCommand(args); inner != nil {
			// LOCK FENCED name token command ...: the command it runs is
			// checked as if sent alone.
			if icmd := c.s.lookup(inner[0]); icmd != nil {
				return c.aclRefusal(icmd, inner, ctx, atExec)
			}
		}
		return reply.Reply{}, false
	}
	c.s.aclLog.add(acl.EntryFor(u.Name(), acmd, args, d, pos, ctx), c)
	if atExec {
		return reply.Error(d.ExecNoPerm()), true
	}
	return reply.Error(d.NoPerm(acmd.Name)), true
}

// fencedCommand is the command LOCK FENCED runs, nil if args is not one.
func fencedCommand(args [][]byte) [][]byte {
	if len(args) > 4 && eqFold(args[0], "lock") && eqFold(args[1], "fenced") {
		return args[4:]
	}
	return nil
}

// authenticate is AUTH's and HELLO AUTH's check of a username and
// password: the connection becomes that user, or the failure is logged.
func (c *conn) authenticate(name, password string, cmdName []byte) (reply.Reply, bool) {
	u, err := c.s.users().Authenticate(name, password)
	if err != nil && c.s.syncUsers(c) {
		u, err = c.s.users().Authenticate(name, password)
	}
	if err != nil {
		c.s.aclLog.add(acl.AuthEntryFor(name, cmdName, acl.ContextToplevel), c)
		return aclError(err), false
	}
	c.user.Store(u)
	c.authed = true
	return reply.OK, true
}

func auth(c *conn, args [][]byte) reply.Reply {
	switch len(args) {
	case 2:
		if c.s.users().Default().NoPass() {
			return reply.Error(acl.ErrAuthNoPassword)
		}
		r, _ := c.authenticate(acl.DefaultUser, string(args[1]), args[0])
		return r
	case 3:
		r, _ := c.authenticate(string(args[1]), string(args[2]), args[0])
		return r
	}
	return errSyntax
}

// UsersChanged disconnects the clients of users that no longer exist (a
// user deleted by ACL DELUSER or ACL LOAD) and the subscribers whose user
// may no longer read a channel or pattern they are subscribed to, as Redis
// does. The node calls it after it applied a change of the users.
func (s *Server) UsersChanged() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hub.mu.RLock()
	defer s.hub.mu.RUnlock()
	for c := range s.conns {
		u := c.user.Load()
		if u == nil || !u.Deleted() && !c.lostChannel(u) {
			continue
		}
		s.log.Debug("resp: closing a client whose user was deleted or lost a channel it is subscribed to", "client", c.addr, "user", u.Name())
		c.cancel()
		_ = c.nc.Close()
	}
}

// lostChannel reports whether u may not read one of c's subscriptions
// (under the hub's lock).
func (c *conn) lostChannel(u *acl.User) bool {
	if u.AllowsAll() {
		return false
	}
	for _, set := range []map[string]struct{}{c.subs.channels, c.subs.shards} {
		for ch := range set {
			if !u.CheckChannel([]byte(ch), false) {
				return true
			}
		}
	}
	for p := range c.subs.patterns {
		if !u.CheckChannel([]byte(p), true) {
			return true
		}
	}
	return false
}

// KeyBuffer finds the keys of a command for the ACL checks (an
// acl.KeySource): Redis's key specs (COMMAND GETKEYSANDFLAGS), and for
// kvorum's LOCK the lock name (a lock is a key). The keys of commands
// whose specs are fixed positions (GET, SET, MGET, HSET, ...) are found
// from a table built once, into the buffer, without allocating; the
// others by cmdspec.KeysWithFlags. A KeyBuffer is for one goroutine at a time.
type KeyBuffer struct{ buf []acl.KeyRef }

func (kb *KeyBuffer) Keys(cmd *acl.Command, args [][]byte) []acl.KeyRef {
	name := cmd.Name
	if cmd.Parent != nil {
		name = cmd.Parent.Name
	}
	out := kb.buf[:0]
	if name == "lock" {
		if len(args) > 2 {
			out = append(out, acl.KeyRef{Pos: 2, Flags: acl.KeyAccess | acl.KeyUpdate})
		}
		kb.buf = out
		return out
	}
	if name == "set" && cmd.Parent == nil && len(args) > 1 { // setGetKeys, as cmdspec.KeysWithFlags
		flags := setFlags
		for _, a := range args[min(3, len(args)):] {
			if eqFold(a, "get") {
				flags = setGetFlags
			}
		}
		out = append(out, acl.KeyRef{Pos: 1, Flags: flags})
		kb.buf = out
		return out
	}
	if specs, ok := fixedKeySpecs[name]; ok && cmd.Parent == nil {
		for _, sp := range specs {
			last := sp.first + sp.lastKey
			if sp.lastKey < 0 {
				last = len(args) + sp.lastKey
			}
			if last >= len(args) || last < sp.first {
				out = out[:0] // the specs do not fit: no keys, as keysBySpecs
				break
			}
			for i := sp.first; i <= last; i += sp.step {
				out = append(out, acl.KeyRef{Pos: i, Flags: sp.flags})
			}
		}
		kb.buf = out
		return out
	}
	refs, _ := cmdspec.KeysWithFlags(cmdspec.KeySubcommand(name, args), args)
	for _, r := range refs {
		out = append(out, acl.KeyRef{Pos: r.Pos, Flags: acl.KeyFlagsOf(r.Flags...)})
	}
	kb.buf = out
	return out
}

// The flags of SET's key without and with its GET option.
var setFlags, setGetFlags = acl.KeyFlagsOf("OW", "update"), acl.KeyFlagsOf("RW", "access", "update")

// fixedKeySpec is a key spec at a fixed index with a range of keys and
// fixed flags: the keys are found without evaluating the spec.
type fixedKeySpec struct {
	first, lastKey, step int // lastKey relative to first; < 0 from the end
	flags                acl.KeyFlags
}

// fixedKeySpecs are the commands whose every key spec is a fixedKeySpec
// (no keyword, key count, limit, unknown part or variable flags).
var fixedKeySpecs = func() map[string][]fixedKeySpec {
	m := map[string][]fixedKeySpec{}
next:
	for name, specs := range cmdspec.RedisKeySpecs {
		if _, _, movable := cmdspec.MovableKeys(name, nil); movable || strings.Contains(name, "|") || len(specs) == 0 {
			continue
		}
		var fs []fixedKeySpec
		for _, s := range specs {
			if s.Keyword != "" || s.KeyNum || s.UnknownBegin || s.UnknownFind || s.Limit != 0 || s.Index < 1 ||
				slices.Contains(s.Flags, "variable_flags") || slices.Contains(s.Flags, "incomplete") || slices.Contains(s.Flags, "not_key") {
				continue next
			}
			fs = append(fs, fixedKeySpec{first: s.Index, lastKey: s.LastKey, step: max(s.Step, 1), flags: acl.KeyFlagsOf(s.Flags...)})
		}
		m[name] = fs
	}
	return m
}()

// denialLog is the node's ACL LOG.
type denialLog struct {
	mu  sync.Mutex
	log *acl.Log
}

func (l *denialLog) add(e acl.LogEntry, c *conn) {
	now := time.Now()
	e.ClientInfo = strings.TrimSuffix(string(c.appendInfoLine(nil, now)), "\n")
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.log == nil {
		l.log = acl.NewLog(acl.DefaultLogMaxLen)
	}
	l.log.Add(e, now)
}

func (l *denialLog) entries(n int) []acl.LogEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.log == nil {
		return nil
	}
	return l.log.Entries(n)
}

func (l *denialLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.log != nil {
		l.log.Reset()
	}
}

// ACLCheck checks args for user u of reg, with the full name of the
// command it found (Allowed for a command the ACLs do not know: its own
// error follows), finding keys with kb: the state machine's check at
// apply time.
func ACLCheck(reg *acl.Registry, u *acl.User, args [][]byte, kb *KeyBuffer) (acl.Denial, string) {
	acmd := reg.Commands().Lookup(args)
	if acmd == nil {
		return acl.Allowed, ""
	}
	d, _ := u.Check(acmd, args, kb)
	return d, acmd.Name
}

type userKey struct{}

// userCheck is the user with restrictions who sent a Backend.Do's
// commands and the version of the users the sending node checked them
// with.
type userCheck struct {
	u       *acl.User
	version uint64
}

// UserOf is the user with restrictions who sent a Backend.Do's commands,
// nil if the connection's user may run everything: the node checks the
// commands again where the rules are current (writes at apply, reads
// after their read point), and checkedAt is the version of the users
// (Config.ACLVersion) they were checked with on receipt (0: unknown): a
// read need not be checked again if the node still has that version.
func UserOf(ctx context.Context) (u *acl.User, checkedAt uint64) {
	if uc, _ := ctx.Value(userKey{}).(*userCheck); uc != nil {
		return uc.u, uc.version
	}
	return nil, 0
}

// WithUser is ctx carrying user u for Backend.Do (UserOf), if u has
// restrictions, with no version it was checked at.
func WithUser(ctx context.Context, u *acl.User) context.Context {
	if u != nil && !u.AllowsAll() {
		return context.WithValue(ctx, userKey{}, &userCheck{u: u})
	}
	return ctx
}

// withUser is WithUser for the connection's user, with the version its
// batch was checked at; the derived context is kept while its parent and
// the user stay the same (one allocation per connection, not per batch).
func (c *conn) withUser(ctx context.Context) context.Context {
	u := c.user.Load()
	if u == nil || u.AllowsAll() {
		return ctx
	}
	if c.uc == nil || c.ucParent != ctx || c.uc.u != u {
		c.uc = &userCheck{u: u}
		c.ucParent, c.ucCtx = ctx, context.WithValue(ctx, userKey{}, c.uc)
	}
	c.uc.version = c.checkedAt
	return c.ucCtx
}

// aclWrapper is a Commands table that proposes the script commands of a
// user with restrictions so that the script's calls are checked for that
// user (package kv: KVORUM.AS).
type aclWrapper interface {
	ACLWrap(user string, args [][]byte) [][]byte
}

// aclWrap is args as this connection proposes it: wrapped by the table
// for the connection's user if that user has restrictions.
func (c *conn) aclWrap(args [][]byte) [][]byte {
	u := c.user.Load()
	w, ok := c.s.table.(aclWrapper)
	if !ok || u == nil || u.AllowsAll() {
		return args
	}
	return w.ACLWrap(u.Name(), args)
}
