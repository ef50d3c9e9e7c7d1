package kv

import (
	"encoding/binary"
	"strconv"

	"github.com/cockroachdb/pebble/v2"
)

// Users (ACL). The cluster's ACL users are one hidden key, kept by
// snapshots and by FLUSHALL like the cluster-wide parameters: a version
// (the log index of the entry that wrote it) and the users' lines, as
// ACL LIST gives them. A change is the internal write
//
//	KVORUM.ACL SET <expected version> <line>...
//
// which replaces every line if the stored version is still the expected
// one (0: none stored yet), so that two nodes changing users at once
// cannot lose one change: the node that proposes it recomputes the lines
// and tries again. KVORUM.ACL GET (a read, behind the usual barrier)
// answers the version followed by the lines. kv stores the lines only;
// the node validates them before it proposes and rebuilds its users
// from them when it applies the entry (ACLSetLines), so that every node
// enforces the same rules from the same log index.

var aclKey = configKey("\x00acl")

// ErrACLChanged is the error of a KVORUM.ACL SET whose expected version
// is not the stored one.
const ErrACLChanged = "ERR ACL users changed concurrently; try again"

func init() {
	def("kvorum.acl", -2, "write", 0, 0, 0, "server", "Internal: reads or replaces the cluster's ACL users.", cmdACL, checkACL)
	table["kvorum.acl"].internal = true
	table["kvorum.acl"].readOnly = func(args [][]byte) bool { return eq(args[1], "GET") }
	specList = specList[:len(specList)-1] // internal: not in COMMAND
}

func checkACL(args [][]byte) (Reply, bool) {
	switch {
	case eq(args[1], "GET") && len(args) == 2:
		return Reply{}, true
	case eq(args[1], "SET") && len(args) >= 3:
		if _, err := strconv.ParseUint(string(args[2]), 10, 64); err != nil {
			return errSyntax, false
		}
		return Reply{}, true
	}
	return errSyntax, false
}

func cmdACL(x *ctx, args [][]byte) Reply {
	v, _, err := getCopy(x.r, aclKey)
	if err != nil {
		return errReply(err)
	}
	version, lines := decodeACL(v)
	if eq(args[1], "GET") {
		out := make([]Reply, 0, 1+len(lines))
		out = append(out, Int(int64(version))) //nolint:gosec // a log index
		for _, l := range lines {
			out = append(out, BulkString(l))
		}
		return Array(out...)
	}
	expect, _ := strconv.ParseUint(string(args[2]), 10, 64)
	if expect != version {
		return Error(ErrACLChanged)
	}
	b := binary.BigEndian.AppendUint64(nil, x.index)
	for _, l := range args[3:] {
		b = binary.AppendUvarint(b, uint64(len(l)))
		b = append(b, l...)
	}
	if err := x.w.Set(aclKey, b, nil); err != nil {
		return errReply(err)
	}
	return Int(int64(x.index)) //nolint:gosec // a log index
}

// decodeACL splits the stored value: its version and lines (0 and none
// if v is empty or malformed).
func decodeACL(v []byte) (version uint64, lines []string) {
	if len(v) < 8 {
		return 0, nil
	}
	version, v = binary.BigEndian.Uint64(v), v[8:]
	for len(v) > 0 {
		n, k := binary.Uvarint(v)
		if k <= 0 || n > uint64(len(v)-k) {
			return version, lines
		}
		lines = append(lines, string(v[k:k+int(n)]))
		v = v[k+int(n):]
	}
	return version, lines
}

// ReadACL reads the cluster's users from r, a node's store: the version
// (0: no ACL change was ever applied) and the lines.
func ReadACL(r pebble.Reader) (version uint64, lines []string, err error) {
	v, _, err := getCopy(r, aclKey)
	if err != nil {
		return 0, nil, err
	}
	version, lines = decodeACL(v)
	return version, lines, nil
}

// ACLSetLines reports whether args is a KVORUM.ACL SET, and its lines:
// the state machine rebuilds its users from them once the entry applied
// without an error.
func ACLSetLines(args [][]byte) (lines []string, ok bool) {
	if len(args) < 3 || !eq(args[0], "kvorum.acl") || !eq(args[1], "SET") {
		return nil, false
	}
	lines = make([]string, 0, len(args)-3)
	for _, l := range args[3:] {
		lines = append(lines, string(l))
	}
	return lines, true
}

// Writes, scripts and ACLs. A node proposes the writes of a user with
// restrictions wrapped as
//
//	KVORUM.AS <username> <command ...>
//
// (a read when the command inside is one: EVAL_RO, FCALL_RO). At apply
// time, on every replica, the command is checked against that user's
// rules as of that log index — where the rules are known to be current,
// whatever the node that received it had applied — and refused with
// Redis's NOPERM if they do not allow it; a script it runs has its
// redis.call and redis.pcall checked as Redis's scriptCall does. The
// state machine's Permissions (Env.Perms, ReadEnv.Perms) answer.

// Permissions checks commands against a user's ACL rules.
type Permissions interface {
	// Denied returns "" if user may run args, else the error text for
	// where it runs: Redis's NOPERM reply, its "ERR The user executing
	// the script ..." for a command a script calls, or EXEC's NOPERM for a
	// command of a transaction.
	Denied(user []byte, args [][]byte, where ACLContext) string
}

// ACLContext is where a command checked by Permissions runs.
type ACLContext uint8

const (
	ACLCommand ACLContext = iota // sent by the client (KVORUM.AS)
	ACLScript                    // called by a script
	ACLExec                      // queued in a transaction
)

// execPermission is the error of a queued command the transaction's user
// may no longer run, ok=false if there is none (EXEC checks each, as
// Redis's execCommand does).
func (x *ctx) execPermission(args [][]byte) (Reply, bool) {
	if x.user == nil || x.perms == nil {
		return Reply{}, false
	}
	if e := x.perms.Denied(x.user, args, ACLExec); e != "" {
		return Error(e), true
	}
	return Reply{}, false
}

func init() {
	def("kvorum.as", -3, "write", 0, 0, 0, "server", "Internal: runs a command for a user whose ACL rules it (and a script's calls) is checked against at apply.", cmdAS, checkAS)
	table["kvorum.as"].internal = true
	table["kvorum.as"].readOnly = func(args [][]byte) bool { return len(args) > 2 && !IsWrite(args[2:]) }
	specList = specList[:len(specList)-1] // internal: not in COMMAND
}

// asInner reports whether KVORUM.AS may wrap the command named name: a
// client's command, or the internal wrappers of scripts, transactions and
// blocking pops.
func asInner(name []byte) bool {
	d := lookup(name)
	if d == nil {
		return false
	}
	switch d.spec.Name {
	case "kvorum.oom", "kvorum.exec", "kvorum.block":
		return true
	}
	return !d.internal
}

func checkAS(args [][]byte) (Reply, bool) {
	if !asInner(args[2]) {
		return Error("ERR internal: KVORUM.AS of an internal command"), false
	}
	return Reply{}, true
}

func cmdAS(x *ctx, args [][]byte) Reply {
	inner := args[2:]
	if !asInner(inner[0]) {
		return Error("ERR internal: KVORUM.AS of an internal command")
	}
	d := lookup(inner[0])
	checked := inner
	if d.spec.Name == "kvorum.block" && len(inner) > 2 {
		checked = inner[2:] // a blocking pop's try: KVORUM.BLOCK <id> <the client's command>
	}
	if x.perms != nil {
		if e := x.perms.Denied(args[1], checked, ACLCommand); e != "" {
			return Error(e)
		}
	}
	if r, ok := validate(d, inner); !ok {
		return r
	}
	if err := x.readLookups(d, inner); err != nil { // Apply made them for KVORUM.AS
		return errReply(err)
	}
	x.user = args[1]
	return d.run(x, inner)
}

// ACLWrap returns args as a node proposes it for user, a user with
// restrictions: wrapped as KVORUM.AS (args itself if it cannot be: an
// internal command, or already wrapped).
func ACLWrap(user string, args [][]byte) [][]byte {
	if len(args) == 0 || !asInner(args[0]) {
		return args
	}
	return append([][]byte{[]byte("KVORUM.AS"), []byte(user)}, args...)
}

// ACLWrap is resp's aclWrapper: the scripts of a user with restrictions
// are wrapped, reads among them included (EVAL_RO runs on the read path,
// and its calls are checked there); the node wraps the other writes.
func (Table) ACLWrap(user string, args [][]byte) [][]byte {
	d := lookup(args[0])
	if d == nil {
		return args
	}
	switch d.spec.Name {
	case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro", "kvorum.oom", "kvorum.exec":
		return ACLWrap(user, args)
	}
	return args
}

// scriptPermission is Redis's scriptVerifyACL: the error of a call the
// script's user may not make, ok=false if there is none.
func (x *ctx) scriptPermission(args [][]byte) (Reply, bool) {
	if x.user == nil || x.perms == nil {
		return Reply{}, false
	}
	if e := x.perms.Denied(x.user, args, ACLScript); e != "" {
		return Error(e), true
	}
	return Reply{}, false
}

// IsACLWrapped reports whether args is already KVORUM.AS.
func IsACLWrapped(args [][]byte) bool { return len(args) > 0 && eq(args[0], "kvorum.as") }
