package kv

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/kvorum/kvorum/internal/cmdspec"
	"github.com/kvorum/kvorum/internal/notify"
	"github.com/kvorum/kvorum/internal/reccache"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/script"
	"github.com/kvorum/kvorum/internal/storage"

	"github.com/cockroachdb/pebble/v2"
)

// Spec describes one data command; see package cmdspec.
type Spec = cmdspec.Spec

// Limits bound client input; 0 means unlimited.
type Limits struct{ MaxKeySize, MaxValueSize int }

// ctx is one command's execution context. Contexts are pooled with their
// scratch buffers.
type ctx struct {
	r          readerI
	w          writer // nil for reads
	now        int64
	index      uint64     // log index of the entry being applied (0 for reads)
	seed       uint64     // deterministic randomness for writes (see rand)
	fx         *Effects   // what the entry did besides replies and writes; nil: not recorded
	nested     bool       // run by call: inside a transaction or FENCED (nobody can park)
	oom        bool       // proposed over maxmemory (KVORUM.OOM, maxmemory.go)
	wrote      bool       // a script's run called a write command (Redis's SCRIPT_WRITE_DIRTY)
	kbuf, vbuf []byte     // scratch: storage key, encoded record
	tbuf       []byte     // scratch: expiry index key (indexTTL)
	deadlines  *Deadlines // Apply only: the node's per-slot earliest deadlines; nil: none
	rbuf       [11]byte   // scratch: a replicated range-local key (rangeKey)
	rng        *rand.PCG
	calls      uint64           // nested commands run by call, for their seeds
	cache      *reccache.Cache  // Apply only: the records the batch and store hold; nil: none
	shared     *reccache.Shared // reads only: the records the store held at or after the read point; nil: none
	notify     notify.Flags     // Apply only: the keyspace events to emit (see event)
	settings   *Settings        // Apply only: the cluster-wide parameters; nil: none
	nbuf       []byte           // scratch: notification channel
	looked     Lookups          // the key lookups get made (ReadCounted)
	// countLooked: Apply only: the node reports the read lookups made at
	// apply (Env.CountLookups; see readLookups).
	countLooked bool
	// missOn: get records the keys it misses in missed (the keymiss
	// events of a read command; see keyMiss).
	missOn bool
	missed [][]byte
	// showRunning: FUNCTION STATS shows the running function (ReadEnv).
	showRunning bool
	scripts     *script.Monitor // the node's record of running scripts; nil: none
	// user is the user a script runs for (KVORUM.AS, acl.go), nil: none;
	// perms checks its calls.
	user  []byte
	perms Permissions
	// desc is the range's descriptor (Env.Desc, ReadEnv.Desc); ranged:
	// it owns less than every slot, so the keys the command touches are
	// checked against it (rangecheck.go). outside: a call run by x hit
	// a key outside it (the backstop in metaKey).
	desc    *storage.Descriptor
	ranged  bool
	outside bool
}

// Env is what Apply knows about the log entry a command comes from.
type Env struct {
	Now   int64  // the leader's clock when it proposed the entry, Unix ms
	Index uint64 // the entry's log index
	Seq   int    // the command's position within the entry
	// Effects, if set, gets what the command did besides its reply and
	// its writes to the batch (keys written, messages published, leases
	// renewed), appended in order, nested commands included; see Effects.
	Effects *Effects
	// Records, if set, is the state machine's record cache: the same one
	// for every Apply on this store, and nothing else may write the
	// store's user keys behind its back (see package reccache).
	Records *reccache.Cache
	// Settings, if set, is the state machine's copy of the cluster-wide
	// parameters (notify-keyspace-events) of the entry's range: one per
	// range, since each range applies its own copy (configcopy.go).
	Settings *Settings
	// Scripts, if set, is the node's record of the scripts running on it
	// (SCRIPT KILL, the BUSY reply, FUNCTION STATS): the scripts the
	// command runs are recorded there while they run.
	Scripts *script.Monitor
	// Perms checks the calls of scripts run for a user (KVORUM.AS); nil:
	// none are checked.
	Perms Permissions
	// CountLookups: the node reports the read lookups made at apply
	// (Effects.Looked, INFO keyspace_hits and keyspace_misses): it leads.
	// Without it, and with keymiss events off, a write command skips the
	// lookups of the keys it reads (they only feed those two).
	CountLookups bool
	// Desc is the descriptor of the range the entry belongs to (nil: no
	// range check, as for the whole slot space). Every user key the
	// command touches must be in its slot interval, or the command writes
	// nothing and replies ErrRangeKeyMismatch (rangecheck.go).
	Desc *storage.Descriptor
	// Deadlines, if set, is the node's per-slot earliest deadlines
	// (expiry.go), which the entry's new expiry index entries lower once
	// the round is committed (Deadlines.Publish).
	Deadlines *Deadlines
}

// rand returns the command's random source: seeded from the log position
// for writes (every replica draws the same numbers), from the clock for reads.
func (x *ctx) rand() *rand.Rand {
	if x.rng == nil {
		x.rng = rand.NewPCG(0, 0)
	}
	if x.w != nil {
		x.rng.Seed(x.index, x.seed)
	} else {
		x.rng.Seed(uint64(time.Now().UnixNano()), rand.Uint64())
	}
	return rand.New(x.rng)
}

var ctxPool = sync.Pool{New: func() any { return new(ctx) }}

func getCtx(r readerI, w writer, now int64) *ctx {
	x := ctxPool.Get().(*ctx)
	x.r, x.w, x.now = r, w, now
	return x
}

func putCtx(x *ctx) {
	x.r, x.w, x.fx, x.index, x.seed, x.calls, x.nested, x.cache, x.shared = nil, nil, nil, 0, 0, 0, false, nil, nil
	x.notify, x.settings, x.looked, x.missOn, x.oom, x.wrote, x.scripts, x.showRunning = 0, nil, Lookups{}, false, false, false, nil, false
	x.user, x.perms = nil, nil
	x.countLooked = false
	x.desc, x.ranged, x.outside = nil, false, false
	x.deadlines = nil
	clear(x.missed)
	x.missed = x.missed[:0]
	if cap(x.vbuf) > 64<<10 {
		x.vbuf = nil
	}
	if cap(x.kbuf) > 64<<10 {
		x.kbuf = nil
	}
	ctxPool.Put(x)
}

type handler func(x *ctx, args [][]byte) Reply

type cmdDef struct {
	spec  Spec
	run   handler
	check func(args [][]byte) (Reply, bool) // syntax beyond arity; nil = none
	// parsed: run parses the arguments itself with the parser check runs
	// (defParsed), so validate leaves the syntax to run: one parse per
	// execution.
	parsed bool
	// internal commands are proposed by the node itself, never by clients.
	internal bool
	// readOnly, for a write command with read-only subcommands (LOCK INFO,
	// LEASE TTL), says whether args is one: it is then served as a read.
	readOnly func(args [][]byte) bool
	// readKeys finds the keys the (write) command looks up for reading
	// before it writes (cmdspec.ReadKeys, decided once here); nil: none.
	readKeys func(args [][]byte) [][]byte
}

var (
	table    = map[string]*cmdDef{}
	specList []*Spec
)

func def(name string, arity int, flags string, first, last, step int, group, summary string, run handler, check func([][]byte) (Reply, bool)) {
	d := &cmdDef{spec: Spec{Name: name, Arity: arity, Flags: strings.Fields(flags), FirstKey: first, LastKey: last, Step: step,
		Write: strings.Contains(flags, "write"), Group: group, Summary: summary}, run: run, check: check,
		readKeys: cmdspec.ReadKeys(name)}
	table[name] = d
	specList = append(specList, &d.spec)
}

// defParsed registers a command whose arguments parse parses into a P.
// The one parser serves both sides of the log: Check runs it before the
// command is proposed or read (and drops the value), and execution runs it
// again on every replica and hands the value to run. A command's syntax
// is thus written once, and Redis's order of errors (syntax before the
// key is looked at) holds by construction: what parse refuses never
// reaches run.
func defParsed[P any](name string, arity int, flags string, first, last, step int, group, summary string,
	parse func(args [][]byte) (P, Reply, bool), run func(x *ctx, args [][]byte, p P) Reply) {
	def(name, arity, flags, first, last, step, group, summary,
		func(x *ctx, args [][]byte) Reply {
			p, r, ok := parse(args)
			if !ok {
				return r
			}
			return run(x, args, p)
		},
		func(args [][]byte) (Reply, bool) {
			_, r, ok := parse(args)
			return r, ok
		})
	table[name].parsed = true
}

// lookup finds a command without allocating for names up to 32 bytes.
func lookup(name []byte) *cmdDef {
	if len(name) > 32 {
		return nil
	}
	var buf [32]byte
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return table[string(buf[:len(name)])]
}

// Lookup returns the command's Spec (case-insensitive), nil if unknown or
// internal.
func Lookup(name []byte) *Spec {
	d := lookup(name)
	if d == nil || d.internal {
		return nil
	}
	return &d.spec
}

// IsWrite reports whether args must be replicated through Raft: unknown
// and internal commands (the write path answers them), write commands
// except their read-only subcommands.
func IsWrite(args [][]byte) bool {
	if len(args) == 0 {
		return true
	}
	d := lookup(args[0])
	if d == nil || d.internal && d.readOnly == nil {
		return true
	}
	return d.spec.Write && (d.readOnly == nil || !d.readOnly(args))
}

// Commands returns every client-visible Spec.
func Commands() []*Spec { return specList }

// IsInternal reports whether name is a command only the node itself may propose.
func IsInternal(name []byte) bool {
	d := lookup(name)
	return d != nil && d.internal
}

func arityOK(s *Spec, args [][]byte) bool {
	return (s.Arity > 0 && len(args) == s.Arity) || (s.Arity < 0 && len(args) >= -s.Arity)
}

// validate repeats Check's arity and syntax checks (not the limits) so that
// Apply and Read never index past args, whatever they are given. A parsed
// command's syntax is checked by its run (defParsed).
func validate(d *cmdDef, args [][]byte) (Reply, bool) {
	if !arityOK(&d.spec, args) {
		return wrongArity(d.spec.Name), false
	}
	if d.check != nil && !d.parsed {
		return d.check(args)
	}
	return Reply{}, true
}

func wrongArity(name string) Reply {
	return Error("ERR wrong number of arguments for '" + name + "' command")
}

// Check validates a command before it is proposed or read: arity, syntax
// and limits. ok=false: reply with r and do nothing else.
func Check(args [][]byte, lim Limits) (r Reply, ok bool) {
	if len(args) == 0 {
		return Error("ERR empty command"), false
	}
	d := lookup(args[0])
	if d == nil || d.internal {
		return reply.UnknownCommand(args), false
	}
	return checkWith(d, args, lim, d.check)
}

// checkWith checks arity and limits, then runs syntax (nil: none).
func checkWith(d *cmdDef, args [][]byte, lim Limits, syntax func([][]byte) (Reply, bool)) (Reply, bool) {
	s := &d.spec
	if !arityOK(s, args) {
		return wrongArity(s.Name), false
	}
	isKey := func(i int) bool {
		if s.FirstKey == 0 || i < s.FirstKey {
			return false
		}
		last := s.LastKey
		if last < 0 {
			last = len(args) + last
		}
		return i <= last && (i-s.FirstKey)%s.Step == 0
	}
	for i := 1; i < len(args); i++ {
		if isKey(i) {
			if lim.MaxKeySize > 0 && len(args[i]) > lim.MaxKeySize {
				return Error(fmt.Sprintf("ERR key too large (%d bytes, limit %d)", len(args[i]), lim.MaxKeySize)), false
			}
		} else if s.Write && lim.MaxValueSize > 0 && len(args[i]) > lim.MaxValueSize {
			return Error(fmt.Sprintf("ERR value too large (%d bytes, limit %d)", len(args[i]), lim.MaxValueSize)), false
		}
	}
	if syntax != nil {
		return syntax(args)
	}
	return Reply{}, true
}

// Apply executes a write command against b, an indexed batch, for the log
// entry env describes. Deterministic. On an error reply nothing was written
// (except by a script or transaction, which keep what ran before the error,
// as in Redis). A command with a key outside env.Desc's slot interval
// replies RangeKeyMismatch (rangecheck.go).
func Apply(b *pebble.Batch, args [][]byte, env Env) (r Reply) {
	defer func() {
		if p := recover(); p != nil {
			if _, ok := p.(rangeMismatch); ok && env.Desc != nil {
				r = RangeKeyMismatch(env.Desc.Generation)
				return
			}
			r = Error(fmt.Sprintf("ERR internal error: %v", p))
		}
	}()
	if len(args) == 0 {
		return Error("ERR empty command")
	}
	d := lookup(args[0])
	if d == nil {
		return reply.UnknownCommand(args)
	}
	if !d.spec.Write {
		return Error("ERR internal: read-only command sent to Apply")
	}
	if r, ok := validate(d, args); !ok {
		return r
	}
	if ranged(env.Desc) && !keysInRange(env.Desc, d, args) {
		return RangeKeyMismatch(env.Desc.Generation)
	}
	x := getCtx(b, b, env.Now)
	x.index, x.seed, x.fx, x.cache, x.settings, x.scripts = env.Index, uint64(env.Seq), env.Effects, env.Records, env.Settings, env.Scripts
	x.perms = env.Perms
	x.deadlines = env.Deadlines
	x.setRange(env.Desc)
	x.countLooked = env.CountLookups
	defer putCtx(x)
	if s := env.Settings; s != nil {
		if err := s.load(b, env.Desc); err != nil {
			return errReply(err)
		}
		x.notify = s.notify
	}
	if err := x.readLookups(d, args); err != nil {
		return errReply(err)
	}
	return d.run(x, args)
}

// Read executes a read-only command against r at time nowMs.
func Read(r pebble.Reader, args [][]byte, nowMs int64) Reply {
	return ReadCached(r, nil, args, nowMs)
}

// ReadCached is Read through shared (nil: none), the read cache that the
// Apply of r's writes publishes to (reccache.Cache.Share).
func ReadCached(r pebble.Reader, shared *reccache.Shared, args [][]byte, nowMs int64) Reply {
	rep, _ := ReadCounted(r, shared, args, nowMs)
	return rep
}

// Lookups counts a read's lookups of keys, as Redis's INFO keyspace_hits
// and keyspace_misses do: one per key looked up (a key the command names
// twice, twice), a hit if it exists.
type Lookups struct {
	Hits, Misses uint64
	// Missed are the keys missed, when ReadCounted was asked for them
	// (keymiss events): the node proposes KVORUM.KEYMISS with them.
	Missed [][]byte
}

// ReadCounted is ReadCached that also returns the key lookups it made.
func ReadCounted(r pebble.Reader, shared *reccache.Shared, args [][]byte, nowMs int64) (rep Reply, looked Lookups) {
	return ReadIn(r, ReadEnv{Shared: shared}, args, nowMs)
}

// ReadEnv is what a read knows of the node that serves it.
type ReadEnv struct {
	// Shared is the node's read cache (see ReadCached); nil: none.
	Shared *reccache.Shared
	// Scripts is the node's record of running scripts (see Env.Scripts);
	// nil: none.
	Scripts *script.Monitor
	// Missed: return the keys the read missed (Lookups.Missed), for
	// their keymiss events (keymiss.go).
	Missed bool
	// RunningScript: FUNCTION STATS shows the function running on the
	// node (set only while the node is busy with it: otherwise, as in
	// Redis, where FUNCTION STATS waits for a run that is not busy yet,
	// running_script is nil; a run the read point waited for has ended).
	RunningScript bool
	// Perms is Env.Perms for reads (EVAL_RO of a user with restrictions).
	Perms Permissions
	// Desc is Env.Desc for reads: a read of a key outside its slot
	// interval replies RangeKeyMismatch (nil: no check).
	Desc *storage.Descriptor
}

// ReadIn is ReadCounted on the node env describes.
func ReadIn(r pebble.Reader, env ReadEnv, args [][]byte, nowMs int64) (rep Reply, looked Lookups) {
	defer func() {
		if p := recover(); p != nil {
			if _, ok := p.(rangeMismatch); ok && env.Desc != nil {
				rep = RangeKeyMismatch(env.Desc.Generation)
				return
			}
			rep = Error(fmt.Sprintf("ERR internal error: %v", p))
		}
	}()
	if len(args) == 0 {
		return Error("ERR empty command"), looked
	}
	d := lookup(args[0])
	if d == nil || d.internal && d.readOnly == nil {
		return reply.UnknownCommand(args), looked
	}
	if d.spec.Write && (d.readOnly == nil || !d.readOnly(args)) {
		return Error("ERR internal: write command sent to Read"), looked
	}
	if r, ok := validate(d, args); !ok {
		return r, looked
	}
	if ranged(env.Desc) && !keysInRange(env.Desc, d, args) {
		return RangeKeyMismatch(env.Desc.Generation), looked
	}
	x := getCtx(r, nil, nowMs)
	x.shared, x.scripts, x.missOn, x.showRunning, x.perms = env.Shared, env.Scripts, env.Missed, env.RunningScript, env.Perms
	x.setRange(env.Desc)
	defer putCtx(x)
	rep = d.run(x, args)
	looked = x.looked
	if len(x.missed) > 0 {
		looked.Missed = append([][]byte(nil), x.missed...)
	}
	return rep, looked
}

// call runs one command from inside a script or a transaction, in x's
// context: the same batch (or reader, for read-only scripts), clock and
// log index. Arity and syntax are checked as Check does (not the size
// limits). A write command in a read-only context is refused. A key
// outside x's range stops the command where it is reached (the backstop,
// rangecheck.go): it replies RangeKeyMismatch, and x.outside is set.
func (x *ctx) call(args [][]byte) (r Reply) {
	if len(args) == 0 {
		return Error("ERR empty command")
	}
	d := lookup(args[0])
	if d == nil || d.internal {
		return reply.UnknownCommand(args)
	}
	if d.spec.Write && x.w == nil {
		return Error("ERR Write commands are not allowed from read-only scripts.")
	}
	if r, ok := validate(d, args); !ok {
		return r
	}
	if x.ranged {
		defer func() {
			if p := recover(); p != nil {
				if _, ok := p.(rangeMismatch); !ok {
					panic(p)
				}
				x.outside = true
				r = RangeKeyMismatch(x.desc.Generation)
			}
		}()
	}
	x.calls++
	y := getCtx(x.r, x.w, x.now)
	y.index, y.seed, y.fx = x.index, x.seed<<20|x.calls, x.fx // effects: the same list, in order
	y.cache, y.shared, y.notify, y.settings, y.scripts, y.countLooked = x.cache, x.shared, x.notify, x.settings, x.scripts, x.countLooked
	y.user, y.perms = x.user, x.perms
	y.desc, y.ranged = x.desc, x.ranged
	y.deadlines = x.deadlines
	y.nested = true
	// A read command's misses are Redis's keymiss events, emitted here
	// at apply (inside MULTI/EXEC or a script) like every other event.
	y.missOn = !d.spec.Write && (x.missOn || x.notify.Emits(notify.KeyMiss))
	defer putCtx(y)
	if err := y.readLookups(d, args); err != nil {
		return errReply(err)
	}
	r = d.run(y, args)
	x.looked.Hits, x.looked.Misses = x.looked.Hits+y.looked.Hits, x.looked.Misses+y.looked.Misses
	if !d.spec.Write && x.w != nil && x.fx != nil {
		x.fx.Looked.Hits += y.looked.Hits
		x.fx.Looked.Misses += y.looked.Misses
	}
	x.missed = append(x.missed, y.missed...) // read path (EVAL_RO); empty at apply
	return r
}

// CachedScripts counts the scripts of the replicated script cache in r
// (INFO number_of_cached_scripts): a walk of their keys, done on demand.
func CachedScripts(r pebble.Reader) (n int, err error) {
	end := append([]byte(nil), scriptPrefix...)
	end[len(end)-1]++
	err = walkRange(r, scriptPrefix, end, nil, false, func(*pebble.Iterator) (bool, error) { n++; return true, nil })
	return n, err
}
