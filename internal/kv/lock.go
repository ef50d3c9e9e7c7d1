package kv

import (
	"encoding/binary"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/lockargs"
	"github.com/kvorum/kvorum/internal/reply"
)

// Locks (issue 7; docs/design-locks.md): a replicated state machine with
// one holder (or a set of SHARED holders), a FIFO queue of waiters and a
// fencing token on every grant.
//
//	'k' <name>                 lock: mode (1), waiters (8), next seq (8), head seq (8), then per holder lease (8), token (8)
//	'q' <len(name):4> <name> <seq:8>   a waiter: lease (8), shared (1)
//
// The apply that frees a lock (release, cancel of a queue head, lease
// expiry or revoke) grants it to the head of the queue, and with a SHARED
// head every SHARED waiter behind it, in the same apply: hand-off costs
// one Raft round. Each grant gets a fresh token (nextToken). The lock's
// key is "touched" (Effects.Written gets LockWaitKey) on every change, which
// wakes the clients the node parks on it; they read their grant from the
// applied state.

var (
	lockPrefix  = []byte{userPrefix, 0x00, 0x00, 'k'}
	queuePrefix = []byte{userPrefix, 0x00, 0x00, 'q'}
)

const (
	modeFree      byte = 0
	modeExclusive byte = 1
	modeShared    byte = 2
)

// waitingPrefix starts what LOCK ACQUIRE returns to the node when it
// queued the client, followed by the last fencing token handed out when it
// queued: the node parks the connection until the grant is applied, and
// takes a holder token above that number for its grant (nextToken hands
// out increasing tokens, so every grant after the queueing gets a higher
// one and every earlier grant a token at or below it, even when the grant
// comes later in the same entry). It never reaches a client. (It was the
// entry's index until a grant in the same entry, whose token can equal
// that index, parked a client that held the lock.)
const waitingPrefix = "KVORUM-LOCK-WAITING "

func (x *ctx) waitingReply() Reply {
	last, err := x.indexKey(counterKey)
	if err != nil {
		return errReply(err)
	}
	return Status(waitingPrefix + strconv.FormatUint(last, 10))
}

// LockWaiting reports whether r means "queued: park the client", and the
// index of the entry that queued it. Any later grant has a larger token,
// so a token at or below it in a lagging replica's state is an earlier,
// released grant to the same lease, not the one being waited for.
func LockWaiting(r Reply) (index uint64, ok bool) {
	if r.Kind != reply.KindStatus || !strings.HasPrefix(string(r.Str), waitingPrefix) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(r.Str[len(waitingPrefix):]), 10, 64)
	return n, err == nil
}

func init() {
	defParsed("lock", -3, "write noscript", 0, 0, 0, "lock", "Locks: ACQUIRE name lease [TIMEOUT ms | WAIT ms] [SHARED] | TRYACQUIRE name lease [SHARED] | RELEASE name token | CANCEL name lease | INFO name | FENCED name token command ...", parseLock, cmdLock)
	table["lock"].spec.Extension = true
	table["lock"].readOnly = func(args [][]byte) bool { return len(args) > 1 && eq(args[1], "INFO") }
	def("kvorum.locktimeout", 3, "write", 0, 0, 0, "lock", "Internal: a parked acquire gives up; replies the token if it was granted meanwhile.", cmdLockTimeout, nil)
	table["kvorum.locktimeout"].internal = true
	specList = specList[:len(specList)-1]
}

type holder struct{ lease, token uint64 }

type lockRec struct {
	mode    byte
	waiters uint64
	nextSeq uint64 // the last waiter seq handed out
	headSeq uint64 // no waiter has a lower seq: where queueHead seeks
	holders []holder
}

// parseLock parses a LOCK command; FENCED's command is checked after the
// rest (lockargs.ParseLock) as Check checks a command (arity and syntax;
// not the size limits).
func parseLock(args [][]byte) (lockargs.Lock, Reply, bool) {
	a, r, ok := lockargs.ParseLock(args)
	if !ok || a.Sub != "fenced" {
		return a, r, ok
	}
	d := lookup(args[4])
	if d == nil || d.internal {
		return a, reply.UnknownCommand(args[4:]), false
	}
	if d.spec.Name == "lock" || d.spec.Name == "lease" || slices.Contains(d.spec.Flags, "noscript") {
		return a, Error("ERR LOCK FENCED cannot run '" + d.spec.Name + "'"), false
	}
	if r, ok := checkWith(d, args[4:], Limits{}, d.check); !ok {
		return a, r, false
	}
	return a, Reply{}, true
}

// Acquire is a LOCK ACQUIRE as the node parks it.
type Acquire struct {
	Name    []byte
	Lease   uint64
	Timeout time.Duration // 0: none
	// KeepQueued (WAIT ms): at the timeout, or if the client goes away,
	// the waiter keeps its place; acquiring again resumes the wait.
	KeepQueued bool
}

// LockAcquire reports whether args is a valid LOCK ACQUIRE (the blocking
// form, which the node parks) and describes it.
func LockAcquire(args [][]byte) (a Acquire, ok bool) {
	if len(args) < 4 || !eq(args[0], "LOCK") || !eq(args[1], "ACQUIRE") {
		return a, false
	}
	l, _, valid := parseLock(args)
	if !valid {
		return a, false
	}
	return Acquire{Name: args[2], Lease: l.ID, Timeout: l.Opts.Timeout, KeepQueued: l.Opts.Keep}, true
}

// Blocks reports whether args may wait on the server (a blocking pop, or
// LOCK ACQUIRE): the connection layer then watches for a disconnect.
func Blocks(args [][]byte) bool {
	if _, ok := LockAcquire(args); ok {
		return true
	}
	if _, _, ok := BlockingTimeout(args); ok {
		return true
	}
	_, _, ok := StreamBlocking(args)
	return ok
}

// LockWaitKey is the key a lock's changes are reported under (Effects.Written).
func LockWaitKey(name []byte) []byte { return lockKey(name) }

// LockTimeoutCommand builds the internal command a parked acquire proposes
// when it gives up.
func LockTimeoutCommand(name []byte, lease uint64) [][]byte {
	return [][]byte{[]byte("KVORUM.LOCKTIMEOUT"), name, strconv.AppendUint(nil, lease, 10)}
}

func cmdLock(x *ctx, args [][]byte, a lockargs.Lock) Reply {
	name := args[2]
	switch a.Sub {
	case "acquire", "tryacquire":
		// Inside a transaction nobody could park: ACQUIRE acts as TRYACQUIRE.
		return x.acquire(name, a.ID, a.Opts.Shared, a.Sub == "acquire" && !x.nested)
	case "release":
		return x.release(name, a.ID)
	case "cancel":
		removed, err := x.cancelWait(name, a.ID)
		if err != nil {
			return errReply(err)
		}
		if removed {
			return Int(1)
		}
		return Int(0)
	case "info":
		return x.lockInfo(name)
	default: // fenced
		if !x.systemState() {
			return errSystemState
		}
		l, _, err := x.getLock(name)
		if err != nil {
			return errReply(err)
		}
		if l.holderByToken(a.ID) < 0 {
			return reply.ErrorText([]byte("FENCED token " + strconv.FormatUint(a.ID, 10) + " is not the current holder of lock '" + string(name) + "'; nothing was written"))
		}
		return x.call(args[4:])
	}
}

// cmdLockTimeout: KVORUM.LOCKTIMEOUT name lease. Leaves the queue; replies
// the lease's token if it holds the lock (granted before the timeout was
// applied: the apply decides, not the client's timer), else null.
func cmdLockTimeout(x *ctx, args [][]byte) Reply {
	id, ok := lockargs.ParseID(args[2])
	if !ok {
		return lockargs.ErrLeaseID
	}
	l, _, err := x.getLock(args[1])
	if err != nil {
		return errReply(err)
	}
	if i := l.holderByLease(id); i >= 0 {
		return Int(int64(l.holders[i].token))
	}
	if _, err := x.cancelWait(args[1], id); err != nil {
		return errReply(err)
	}
	return Nil
}

func (x *ctx) acquire(name []byte, id uint64, shared, block bool) Reply {
	if _, ok, err := x.getLease(id); err != nil {
		return errReply(err)
	} else if !ok {
		return errNoLease(id)
	}
	l, _, err := x.getLock(name)
	if err != nil {
		return errReply(err)
	}
	if i := l.holderByLease(id); i >= 0 {
		return Int(int64(l.holders[i].token)) // already ours: acquire is idempotent
	}
	seq, err := x.waitSeq(name, id)
	if err != nil {
		return errReply(err)
	}
	if seq > 0 { // already queued (a retried acquire keeps its place)
		if block {
			return x.waitingReply()
		}
		return Nil
	}
	mode := modeExclusive
	if shared {
		mode = modeShared
	}
	if l.mode == modeFree || (mode == modeShared && l.mode == modeShared && l.waiters == 0) {
		tok, err := x.grant(&l, name, id, mode)
		if err != nil {
			return errReply(err)
		}
		if err := x.putLock(name, &l); err != nil {
			return errReply(err)
		}
		return Int(int64(tok))
	}
	if !block {
		return Nil
	}
	l.nextSeq++
	seq = l.nextSeq
	l.waiters++
	w := make([]byte, 9)
	binary.BigEndian.PutUint64(w, id)
	if shared {
		w[8] = 1
	}
	if err := x.w.Set(queueKey(name, seq), w, nil); err != nil {
		return errReply(err)
	}
	if err := x.setOwned(id, name, seq); err != nil {
		return errReply(err)
	}
	if err := x.putLock(name, &l); err != nil {
		return errReply(err)
	}
	return x.waitingReply()
}

// grant makes lease id a holder of l (the caller stores l).
func (x *ctx) grant(l *lockRec, name []byte, id uint64, mode byte) (uint64, error) {
	tok, err := x.nextToken()
	if err != nil {
		return 0, err
	}
	l.mode = mode
	l.holders = append(l.holders, holder{id, tok})
	return tok, x.setOwned(id, name, 0)
}

func (x *ctx) release(name []byte, tok uint64) Reply {
	l, _, err := x.getLock(name)
	if err != nil {
		return errReply(err)
	}
	i := l.holderByToken(tok)
	if i < 0 {
		cur := "it is free"
		if len(l.holders) > 0 {
			cur = "current token " + strconv.FormatUint(l.holders[len(l.holders)-1].token, 10)
		}
		return reply.ErrorText([]byte("STALE fencing token " + strconv.FormatUint(tok, 10) + " does not hold lock '" + string(name) + "' (" + cur + "); nothing changed"))
	}
	id := l.holders[i].lease
	l.holders = append(l.holders[:i], l.holders[i+1:]...)
	if err := x.setOwned(id, name, ownedNone); err != nil {
		return errReply(err)
	}
	if err := x.settle(name, &l); err != nil {
		return errReply(err)
	}
	return Int(1)
}

// cancelWait removes lease id's waiter from name's queue, if it has one.
func (x *ctx) cancelWait(name []byte, id uint64) (bool, error) {
	seq, err := x.waitSeq(name, id)
	if err != nil || seq == 0 {
		return false, err
	}
	l, _, err := x.getLock(name)
	if err != nil {
		return false, err
	}
	if err := x.setOwned(id, name, ownedNone); err != nil {
		return false, err
	}
	if err := x.w.Delete(queueKey(name, seq), nil); err != nil {
		return false, err
	}
	l.waiters--
	return true, x.settle(name, &l)
}

// lockDropLease removes lease id from name, as holder (seq 0) or waiter.
func (x *ctx) lockDropLease(name []byte, id, seq uint64) error {
	l, _, err := x.getLock(name)
	if err != nil {
		return err
	}
	if seq > 0 {
		if err := x.w.Delete(queueKey(name, seq), nil); err != nil {
			return err
		}
		l.waiters--
	} else if i := l.holderByLease(id); i >= 0 {
		l.holders = append(l.holders[:i], l.holders[i+1:]...)
	}
	return x.settle(name, &l)
}

// settle grants the lock to the head of its queue while the head is
// compatible with the holders, then stores l (or deletes it when it is
// free with nobody waiting).
func (x *ctx) settle(name []byte, l *lockRec) error {
	if len(l.holders) == 0 {
		l.mode = modeFree
	}
	for l.waiters > 0 && l.mode != modeExclusive {
		seq, id, shared, err := x.queueHead(name, l.headSeq)
		if err != nil {
			return err
		}
		if seq == 0 { // inconsistent count: trust the queue
			l.waiters = 0
			break
		}
		if l.mode == modeShared && !shared {
			break // an exclusive head waits for the shared holders
		}
		if err := x.w.Delete(queueKey(name, seq), nil); err != nil {
			return err
		}
		l.waiters--
		l.headSeq = seq + 1
		mode := modeExclusive
		if shared {
			mode = modeShared
		}
		if _, err := x.grant(l, name, id, mode); err != nil {
			return err
		}
	}
	return x.putLock(name, l)
}

// queueHead returns name's first waiter at or after seq from (seq 0:
// none). Starting at the known head matters: every waiter granted before
// left a deletion behind, and an iterator from the start of the queue
// would step over all of them (in a busy lock, thousands per grant).
func (x *ctx) queueHead(name []byte, from uint64) (seq, id uint64, shared bool, err error) {
	p := queueKey(name, 0)
	p = p[:len(p)-8]
	it, err := x.r.NewIter(&pebble.IterOptions{LowerBound: queueKey(name, from), UpperBound: prefixEnd(p)})
	if err != nil {
		return 0, 0, false, err
	}
	defer it.Close()
	if !it.First() {
		return 0, 0, false, it.Error()
	}
	k := it.Key()
	v, err := it.ValueAndErr()
	if err != nil || len(k) != len(p)+8 || len(v) != 9 {
		return 0, 0, false, errors.Join(err, errCorruptRecord)
	}
	return binary.BigEndian.Uint64(k[len(p):]), binary.BigEndian.Uint64(v), v[8] == 1, nil
}

func (x *ctx) lockInfo(name []byte) Reply {
	l, _, err := x.getLock(name)
	if err != nil {
		return errReply(err)
	}
	mode := [...]string{"free", "exclusive", "shared"}[l.mode%3]
	hs := make([]Reply, len(l.holders))
	var tok uint64
	for i, h := range l.holders {
		hs[i] = Array(Int(int64(h.lease)), Int(int64(h.token)))
		tok = max(tok, h.token)
	}
	return Map(BulkString("mode"), BulkString(mode), BulkString("token"), Int(int64(tok)),
		BulkString("holders"), Array(hs...), BulkString("waiters"), Int(int64(l.waiters)))
}

func (l *lockRec) holderByToken(tok uint64) int {
	for i, h := range l.holders {
		if h.token == tok {
			return i
		}
	}
	return -1
}

func (l *lockRec) holderByLease(id uint64) int {
	for i, h := range l.holders {
		if h.lease == id {
			return i
		}
	}
	return -1
}

func lockKey(name []byte) []byte {
	return append(append(make([]byte, 0, len(lockPrefix)+len(name)), lockPrefix...), name...)
}

func queueKey(name []byte, seq uint64) []byte {
	b := make([]byte, 0, len(queuePrefix)+12+len(name))
	b = append(b, queuePrefix...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(name)))
	b = append(b, name...)
	return binary.BigEndian.AppendUint64(b, seq)
}

func (x *ctx) getLock(name []byte) (lockRec, bool, error) {
	return readLock(x.r, name)
}

// lockHeader: mode (1), waiters (8), next seq (8), head seq (8).
const lockHeader = 25

func readLock(r pebble.Reader, name []byte) (lockRec, bool, error) {
	v, c, err := r.Get(lockKey(name))
	if errors.Is(err, pebble.ErrNotFound) {
		return lockRec{}, false, nil
	}
	if err != nil {
		return lockRec{}, false, err
	}
	defer c.Close()
	if len(v) < lockHeader || (len(v)-lockHeader)%16 != 0 {
		return lockRec{}, false, errCorruptRecord
	}
	l := lockRec{mode: v[0], waiters: binary.BigEndian.Uint64(v[1:]), nextSeq: binary.BigEndian.Uint64(v[9:]), headSeq: binary.BigEndian.Uint64(v[17:])}
	for p := v[lockHeader:]; len(p) >= 16; p = p[16:] {
		l.holders = append(l.holders, holder{binary.BigEndian.Uint64(p), binary.BigEndian.Uint64(p[8:])})
	}
	return l, true, nil
}

// putLock stores l and reports the change to parked clients. A free lock
// is stored too, not deleted: a lock taken and released in a loop is
// rewritten twice per cycle, and a read of a key whose newest version is a
// deletion steps over all its older versions still in the memtable (a
// profile of 5 clients each looping on its own lock showed a sixth of the
// nodes' CPU there). The record of a free lock goes with the leases that
// used it (dropFreeLock).
func (x *ctx) putLock(name []byte, l *lockRec) error {
	k := lockKey(name)
	v := make([]byte, lockHeader, lockHeader+16*len(l.holders))
	v[0] = l.mode
	binary.BigEndian.PutUint64(v[1:], l.waiters)
	binary.BigEndian.PutUint64(v[9:], l.nextSeq)
	binary.BigEndian.PutUint64(v[17:], l.headSeq)
	for _, h := range l.holders {
		v = binary.BigEndian.AppendUint64(v, h.lease)
		v = binary.BigEndian.AppendUint64(v, h.token)
	}
	if err := x.w.Set(k, v, nil); err != nil {
		return err
	}
	x.touched(k)
	return nil
}

// dropFreeLock deletes name's record if nobody holds or waits for it. A
// lease that goes calls it for every lock it used, so the records of
// locks no live lease has used do not pile up. Nothing is lost with the
// record: a free lock without waiters has no state but its queue
// sequence, which only orders waiters that are queued together.
func (x *ctx) dropFreeLock(name []byte) error {
	l, ok, err := x.getLock(name)
	if err != nil || !ok || len(l.holders) > 0 || l.waiters > 0 {
		return err
	}
	return x.w.Delete(lockKey(name), nil)
}

// ownedNone marks a lease that neither holds nor waits for a lock it
// once did. The key is overwritten rather than deleted: it is rewritten on
// every grant and release, and a read of a key whose newest version is a
// deletion steps over all its older versions still in the memtable (a
// busy lease's thousands), while a read that finds a value stops there.
// dropLease deletes the keys with the lease.
const ownedNone = ^uint64(0)

// setOwned records lease id's place in lock name (seq 0: holder).
func (x *ctx) setOwned(id uint64, name []byte, seq uint64) error {
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], seq)
	return x.w.Set(ownedKey(id, 'l', name), v[:], nil)
}

// waitSeq returns lease id's waiter seq in name's queue (0: not waiting).
func (x *ctx) waitSeq(name []byte, id uint64) (uint64, error) {
	seq, err := x.indexKey(ownedKey(id, 'l', name))
	if seq == ownedNone {
		seq = 0
	}
	return seq, err
}

// LockState is what a parked client's node reads after a wake-up: the
// lease's token if it holds the lock, whether it still waits in the queue,
// and whether the lease still exists.
func LockState(r pebble.Reader, name []byte, id uint64) (token uint64, waiting, leaseAlive bool, err error) {
	x := getCtx(r, nil, 0)
	defer putCtx(x)
	if _, leaseAlive, err = x.getLease(id); err != nil || !leaseAlive {
		return 0, false, leaseAlive, err
	}
	l, _, err := x.getLock(name)
	if err != nil {
		return 0, false, true, err
	}
	if i := l.holderByLease(id); i >= 0 {
		return l.holders[i].token, false, true, nil
	}
	seq, err := x.waitSeq(name, id)
	return 0, seq > 0, true, err
}
