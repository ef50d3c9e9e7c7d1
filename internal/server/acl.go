package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/acl"
	"github.com/kvorum/kvorum/internal/kv"
	"github.com/kvorum/kvorum/internal/resp"
)

// ACL users. The cluster's users are replicated state (kv's KVORUM.ACL:
// the lines of ACL LIST under a version, the log index that wrote them);
// each node keeps an acl.Registry in step with its applied log, which its
// RESP server checks clients against. The registry is rebuilt when the
// node applies a change (in the apply loop, so from the same log index on
// every node), when a snapshot replaces the keyspace (once the round is
// in the store) and when the node starts. Until the first change is
// applied (version 0) a node's users are those of its own flags,
// --requirepass and --aclfile: start every node with the same ones.

// aclUsers is the node's users and the version applied.
type aclUsers struct {
	reg *acl.Registry
	// initial are the users of --requirepass and --aclfile, the users
	// while no change was ever applied.
	initial []string
	version atomic.Uint64
	// stale: a snapshot replaced the keyspace in the round being
	// applied (apply loop only); the users are read again at Committed.
	stale bool
	// changed is called after the users changed (resp.Server's
	// UsersChanged: the clients of deleted users are disconnected).
	changed func()
	log     *slog.Logger
}

// newACLUsers builds the node's users from its flags: the ACL file's
// users if --aclfile is set, else Redis's default user with
// --requirepass's password if set.
func newACLUsers(cfg *Config, cmds *acl.Commands, log *slog.Logger) (*aclUsers, error) {
	reg := acl.NewRegistry(cmds)
	switch {
	case cfg.ACLFile != "":
		content, err := os.ReadFile(cfg.ACLFile)
		if err != nil {
			return nil, fmt.Errorf("--aclfile: %w", err)
		}
		if err := reg.Load(cfg.ACLFile, content); err != nil {
			return nil, fmt.Errorf("--aclfile %s: %v", cfg.ACLFile, err)
		}
		if cfg.RequirePass != "" {
			log.Warn("--requirepass is ignored with --aclfile (as in Redis): set the default user's password in the ACL file")
		}
	case cfg.RequirePass != "":
		// Redis's requirepass: the default user's only password.
		if err := reg.SetUser(acl.DefaultUser, "resetpass", ">"+cfg.RequirePass); err != nil {
			return nil, fmt.Errorf("--requirepass: %v", err)
		}
	}
	return &aclUsers{reg: reg, initial: reg.Lines(), log: log}, nil
}

// load makes the users those stored in r (the initial ones if none are).
func (a *aclUsers) load(r pebble.Reader) error {
	version, lines, err := kv.ReadACL(r)
	if err != nil {
		return err
	}
	a.sync(version, lines)
	return nil
}

// sync makes the users lines, at version (0: the initial users).
func (a *aclUsers) sync(version uint64, lines []string) {
	if version == 0 {
		lines = a.initial
	} else if a.version.Load() == 0 && !slices.Equal(lines, a.initial) {
		a.log.Info("the cluster's ACL users (changed by ACL SETUSER, DELUSER or LOAD) replace this node's --requirepass and --aclfile users", "version", version)
	}
	if err := a.reg.SyncLines(lines); err != nil {
		// Every node validates the same lines the same way: none applies
		// them. The proposer checked them, so this is a bug or damage.
		a.log.Error("the cluster's ACL users do not load; the previous users stay", "version", version, "err", err)
		return
	}
	a.version.Store(version)
	if a.changed != nil {
		a.changed()
	}
}

// respACL is what the RESP server needs to know about the users.
func (a *aclUsers) respConfig(cfg *Config, rc *resp.Config) {
	rc.Users = a.reg
	rc.ACLVersion = a.version.Load
	rc.ACLFile = cfg.ACLFile
}

// SyncUsers waits for a read barrier: the node has then applied every
// change of the users committed before the call (resp.UsersSyncer).
func (b *backend) SyncUsers(ctx context.Context) bool {
	n := (*Node)(b)
	ctx, cancel := n.withRequestTimeout(ctx)
	defer cancel()
	return n.readBarrier(ctx) == nil
}

// keyBuffers serve the checks at apply and on the read path.
var keyBuffers = sync.Pool{New: func() any { return new(resp.KeyBuffer) }}

// Denied is kv.Permissions: commands are checked for their user with the
// users as applied at this log index (a user deleted since the command
// was sent may run nothing).
func (a *aclUsers) Denied(user []byte, args [][]byte, where kv.ACLContext) string {
	d, name := acl.DeniedCommand, strings.ToLower(string(args[0]))
	if u := a.reg.User(string(user)); u != nil {
		kb := keyBuffers.Get().(*resp.KeyBuffer)
		d, name = resp.ACLCheck(a.reg, u, args, kb)
		keyBuffers.Put(kb)
		if d == acl.Allowed {
			return ""
		}
	}
	switch where {
	case kv.ACLScript:
		return "ERR The user executing the script " + d.Message()
	case kv.ACLExec:
		return d.ExecNoPerm()
	}
	return d.NoPerm(name)
}

// asUser wraps the writes of a user with restrictions (resp.UserOf) so
// that the state machine checks them at apply (kv's KVORUM.AS).
func asUser(ctx context.Context, cmds [][][]byte) [][][]byte {
	u, _ := resp.UserOf(ctx)
	if u == nil {
		return cmds
	}
	out := make([][][]byte, len(cmds))
	for i, c := range cmds {
		if kv.IsACLWrapped(c) {
			out[i] = c
		} else {
			out[i] = kv.ACLWrap(u.Name(), c)
		}
	}
	return out
}

// readDenied is the refusal of a read of a user with restrictions, checked
// after the read point (the users are then current), "" if allowed.
func (n *Node) readDenied(ctx context.Context, args [][]byte) string {
	u, checkedAt := resp.UserOf(ctx)
	if u == nil || n.machine.acl == nil || kv.IsACLWrapped(args) || checkedAt != 0 && checkedAt == n.machine.acl.version.Load() {
		return "" // checked on receipt with the users this node still has
	}
	return n.machine.acl.Denied([]byte(u.Name()), args, kv.ACLCommand)
}
