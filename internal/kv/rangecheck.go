package kv

import (
	"errors"
	"strconv"

	"github.com/kvorum/kvorum/internal/cmdspec"
	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/storage"
)

// The range check (docs/ranges.md §3.1, §3.5). A range owns an interval of
// hash slots (storage.Descriptor), and a command applied in its log may
// touch only keys of that interval: a proposal made before a split and
// applied after it, for a key that moved to the other half, must not
// write it (the other range owns it now), so it fails with
// ErrRangeKeyMismatch, having written nothing, and the node retries it on
// the range that owns the key.
//
// Two checks, both skipped (one branch) when the range owns every slot
// or there is no descriptor (Env.Desc nil):
//
//   - Up front, in Apply and ReadIn, before the command runs: every key
//     the command declares (cmdspec.Keys, the keys of COMMAND GETKEYS),
//     and those of the commands it wraps (KVORUM.EXEC's watched keys and
//     queued commands, KVORUM.AS, KVORUM.OOM, KVORUM.BLOCK, LOCK ...
//     FENCED) must be in the interval, or the reply is
//     -KVORUM RANGEKEYMISMATCH <generation> and nothing is written or
//     read. This covers the keys of every command but a script's.
//   - The backstop, in ctx.metaKey, the one place the storage key of a
//     user key is built for a command: a key outside the interval stops
//     the command (a rangeMismatch panic) before its record is read or
//     written. It catches the keys a command reaches without declaring
//     them: a script's redis.call of a key it did not pass in KEYS (each
//     call's declared keys are also checked before the call runs: see
//     scriptCall), SORT's BY and GET patterns. The command's writes
//     before that point are not undone (the round's batch has no
//     savepoints): a script gets Redis Cluster's error for the call
//     (ERR Script attempted to access a non local key in a cluster node,
//     raised by redis.call, returned by redis.pcall) and keeps the writes
//     of its earlier calls, as a Redis Cluster script does; a command run
//     by KVORUM.EXEC gets -KVORUM RANGEKEYMISMATCH as its reply in EXEC's
//     array, the others keep theirs; any other command replies
//     -KVORUM RANGEKEYMISMATCH (SORT reads its BY and GET keys before it
//     writes, so it has written nothing).

// ErrRangeKeyMismatch is the error of a command with a key outside the
// slot interval of the range that applies it (RangeKeyMismatch is its
// reply).
var ErrRangeKeyMismatch = errors.New("KVORUM RANGEKEYMISMATCH")

// RangeKeyMismatch is the reply to a command refused by the range check:
// -KVORUM RANGEKEYMISMATCH <generation of the range's descriptor>.
func RangeKeyMismatch(gen uint64) Reply {
	return Error(ErrRangeKeyMismatch.Error() + " " + strconv.FormatUint(gen, 10))
}

// IsRangeKeyMismatch reports whether r is a RangeKeyMismatch reply, and
// the generation it names.
func IsRangeKeyMismatch(r Reply) (gen uint64, ok bool) {
	const p = "KVORUM RANGEKEYMISMATCH "
	if r.Kind != reply.KindError || len(r.Str) <= len(p) || string(r.Str[:len(p)]) != p {
		return 0, false
	}
	gen, err := strconv.ParseUint(string(r.Str[len(p):]), 10, 64)
	return gen, err == nil
}

// errNonLocal is Redis Cluster's error for a script's call of a key the
// node does not own.
var errNonLocal = Error("ERR Script attempted to access a non local key in a cluster node")

// rangeMismatch is the panic of the backstop (ctx.metaKey), recovered by
// Apply, ReadIn and ctx.call.
type rangeMismatch struct{}

// ranged reports whether desc restricts the keys a command may touch.
func ranged(desc *storage.Descriptor) bool { return desc != nil && !desc.IsFull() }

// setRange makes x check the keys it touches against desc.
func (x *ctx) setRange(desc *storage.Descriptor) {
	x.desc, x.ranged = desc, ranged(desc)
}

// checkKey is the backstop: it stops the command if k is outside the
// range. Called only when x.ranged.
func (x *ctx) checkKey(k []byte) {
	if !x.desc.ContainsSlot(slot.Of(k)) {
		panic(rangeMismatch{})
	}
}

// keysInRange reports whether every key args declares (with the commands
// it wraps) is in desc's interval. d is args' command, validated.
func keysInRange(desc *storage.Descriptor, d *cmdDef, args [][]byte) bool {
	return declaredKeys(d, args, func(k []byte) bool { return desc.ContainsSlot(slot.Of(k)) }, 0)
}

// declaredKeys calls in for the keys args declares, with those of the
// commands it wraps, until in returns false; it returns false then. A
// wrapper too malformed to find its command in is let through: it fails
// when it runs, before it touches a key.
func declaredKeys(d *cmdDef, args [][]byte, in func(k []byte) bool, depth int) bool {
	if depth > 4 {
		return true // wrappers nest at most KVORUM.AS > KVORUM.OOM/BLOCK/EXEC > LOCK FENCED
	}
	inner := func(cmd [][]byte) bool {
		if len(cmd) == 0 {
			return true
		}
		d := lookup(cmd[0])
		if d == nil || !arityOK(&d.spec, cmd) {
			return true
		}
		return declaredKeys(d, cmd, in, depth+1)
	}
	switch d.spec.Name {
	case "kvorum.exec":
		nw, ok := redisnum.ParseInt(args[1])
		if !ok || nw < 0 || int64(len(args)-2) < 2*nw {
			return true
		}
		i := 2
		for ; i < 2+2*int(nw); i += 2 {
			if !in(args[i]) {
				return false
			}
		}
		for i < len(args) {
			argc, ok := redisnum.ParseInt(args[i])
			if !ok || argc < 1 || int64(len(args)-i-1) < argc {
				return true
			}
			if !inner(args[i+1 : i+1+int(argc)]) {
				return false
			}
			i += 1 + int(argc)
		}
		return true
	case "kvorum.as", "kvorum.block":
		return inner(args[2:])
	case "kvorum.oom":
		return inner(args[1:])
	case "kvorum.watchreg":
		for _, k := range args[1:] {
			if !in(k) {
				return false
			}
		}
		return true
	case "lock":
		if len(args) > 4 && eq(args[1], "fenced") {
			return inner(args[4:])
		}
		return true
	}
	var buf [8][]byte
	for _, k := range cmdspec.Keys(buf[:0], &d.spec, args) {
		if !in(k) {
			return false
		}
	}
	return true
}

// systemState reports whether the running command may read and write the
// state range 1 owns (the script cache, leases, locks): only in range 1,
// or in an unsplit store. A command of another range that read it would
// see it as of where this node's range 1 has applied, which differs
// between the range's replicas: their states would diverge. Until
// commands across ranges land (docs/ranges.md §4), such a command answers
// errSystemState there instead (EVALSHA answers NOSCRIPT: the node
// resolves EVALSHA to EVAL before proposing it to another range).
func (x *ctx) systemState() bool { return !x.ranged || descRange(x.desc) == 1 }

var errSystemState = Error("CROSSRANGE the command needs a lock or lease, which live in range 1, and its key is in another range; commands across ranges are not supported yet (issue 18, slice 2): use a key of range 1 (see CLUSTER SLOTS)")
