package kv

import (
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/reply"
)

// lockLog applies commands as successive log entries (index 100, 101, ...)
// and records the lease events the node would see.
type lockLog struct {
	t      *testing.T
	db     *pebble.DB
	index  uint64
	events []string
	woken  map[string]int
	// noLimits: no key and value size limits (a node's are configurable).
	noLimits bool
}

func newLockLog(t *testing.T) *lockLog {
	return &lockLog{t: t, db: openMem(t), index: 99, woken: map[string]int{}}
}

func (l *lockLog) do(s ...string) Reply {
	l.t.Helper()
	args := toArgs(s...)
	lim := Limits{MaxKeySize: 64, MaxValueSize: 1024}
	if l.noLimits {
		lim = Limits{}
	}
	if r, ok := Check(args, lim); !ok && !IsInternal(args[0]) {
		return r
	}
	if !IsWrite(args) {
		return Read(l.db, args, 1_000_000+int64(l.index))
	}
	l.index++
	b := l.db.NewIndexedBatch()
	defer b.Close()
	var fx Effects
	r := Apply(b, args, Env{Now: 1_000_000 + int64(l.index), Index: l.index, Effects: &fx})
	if err := b.Commit(pebble.NoSync); err != nil {
		l.t.Fatal(err)
	}
	for _, k := range fx.Written {
		l.woken[string(k)]++
	}
	for _, e := range fx.Leases {
		l.events = append(l.events, strconv.FormatUint(e.ID, 10)+"@"+strconv.FormatUint(e.RenewIdx, 10)+"/"+strconv.FormatInt(e.TTLMs, 10))
	}
	return r
}

func (l *lockLog) id(s ...string) string {
	l.t.Helper()
	r := l.do(s...)
	if r.Kind != reply.KindInt || r.Int <= 0 {
		l.t.Fatalf("%v: want a positive integer, got %s", s, show(r))
	}
	return strconv.FormatInt(r.Int, 10)
}

func (l *lockLog) want(want string, s ...string) {
	l.t.Helper()
	if got := show(l.do(s...)); got != want {
		l.t.Errorf("%v = %s, want %s", s, got, want)
	}
}

func (l *lockLog) info(name string) string {
	l.t.Helper()
	return show(l.do("LOCK", "INFO", name))
}

func TestLockQueueHandOffAndTokens(t *testing.T) {
	l := newLockLog(t)
	a, b, c := l.id("LEASE", "GRANT", "5000"), l.id("LEASE", "GRANT", "5000"), l.id("LEASE", "GRANT", "5000")
	ta := l.id("LOCK", "ACQUIRE", "x", a)
	l.want(ta, "LOCK", "ACQUIRE", "x", a) // idempotent for the holder
	l.want("(nil)", "LOCK", "TRYACQUIRE", "x", b)
	if r := l.do("LOCK", "ACQUIRE", "x", b); !isWaiting(r) {
		t.Fatalf("second acquire: %s, want queued", show(r))
	}
	if r := l.do("LOCK", "ACQUIRE", "x", c); !isWaiting(r) {
		t.Fatalf("third acquire: %s, want queued", show(r))
	}
	if r := l.do("LOCK", "ACQUIRE", "x", b); !isWaiting(r) { // a retry keeps its place
		t.Fatalf("retried acquire: %s, want queued", show(r))
	}
	l.want("[mode exclusive token "+ta+" holders [["+a+" "+ta+"]] waiters 2]", "LOCK", "INFO", "x")

	before := l.info("x")
	l.want("ERR<STALE fencing token 1 does not hold lock 'x' (current token "+ta+"); nothing changed>", "LOCK", "RELEASE", "x", "1")
	if got := l.info("x"); got != before {
		t.Fatalf("a stale release changed the lock: %s -> %s", before, got)
	}

	woken := l.woken[string(LockWaitKey([]byte("x")))]
	l.want("1", "LOCK", "RELEASE", "x", ta)
	if l.woken[string(LockWaitKey([]byte("x")))] == woken {
		t.Fatal("the release did not report the lock's change (parked clients would not wake)")
	}
	// The head (b) was granted in the release's own entry: its token is that index.
	tok, waiting, alive, err := LockState(l.db, []byte("x"), mustU(t, b))
	if err != nil || waiting || !alive || tok != l.index {
		t.Fatalf("b after release: token %d waiting %v alive %v err %v; want token %d", tok, waiting, alive, err, l.index)
	}
	if tok <= mustU(t, ta) {
		t.Fatalf("tokens went backwards: %d then %d", mustU(t, ta), tok)
	}
	tb := strconv.FormatUint(tok, 10)
	l.want("1", "LOCK", "RELEASE", "x", tb)
	tc, _, _, _ := LockState(l.db, []byte("x"), mustU(t, c))
	if tc <= tok {
		t.Fatalf("c's token %d not above b's %d", tc, tok)
	}
	l.want("1", "LOCK", "RELEASE", "x", strconv.FormatUint(tc, 10))
	l.want("[mode free token 0 holders [] waiters 0]", "LOCK", "INFO", "x")
}

func mustU(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestLeaseExpiryReleasesLocksAndKeys(t *testing.T) {
	l := newLockLog(t)
	a := l.id("LEASE", "GRANT", "1000")
	grantIdx := l.index
	b := l.id("LEASE", "GRANT", "1000")
	l.want("OK", "SET", "k1", "v", "LEASE", a)
	l.want("OK", "SET", "k2", "v", "LEASE", a)
	l.want("OK", "SET", "k2", "w") // written after attaching: detached
	l.want("ERR<NOLEASE lease 999 not found (expired or revoked)>", "SET", "k3", "v", "LEASE", "999")
	l.want("0", "EXISTS", "k3")
	ta := l.id("LOCK", "ACQUIRE", "x", a)
	if r := l.do("LOCK", "ACQUIRE", "x", b); !isWaiting(r) {
		t.Fatalf("b: %s, want queued", show(r))
	}
	// A keep-alive applied after the leader timed the lease wins the race.
	l.want(strconv.Itoa(1000), "LEASE", "KEEPALIVE", a)
	renew := l.index
	l.want("0", "KVORUM.LEASEEXPIRE", a, strconv.FormatUint(grantIdx, 10))
	l.want(ta, "LOCK", "ACQUIRE", "x", a)
	l.events = nil
	l.want("1", "KVORUM.LEASEEXPIRE", a, strconv.FormatUint(renew, 10))
	expiredAt := l.index
	if len(l.events) != 1 || l.events[0] != a+"@"+strconv.FormatUint(l.index, 10)+"/0" {
		t.Fatalf("lease events %v, want the expiry of %s", l.events, a)
	}
	l.want("0", "EXISTS", "k1")
	l.want("w", "GET", "k2")
	l.want("-2", "LEASE", "TTL", a)
	l.want("ERR<NOLEASE lease "+a+" not found (expired or revoked)>", "LEASE", "KEEPALIVE", a)
	l.want("ERR<NOLEASE lease "+a+" not found (expired or revoked)>", "LOCK", "ACQUIRE", "y", a)
	tb, _, _, _ := LockState(l.db, []byte("x"), mustU(t, b))
	if tb != expiredAt { // granted by the expiry entry
		t.Fatalf("b's token after a's expiry = %d, want %d", tb, expiredAt)
	}
	l.want("["+b+"]", "LEASE", "LIST")
	l.want("1", "LEASE", "REVOKE", b)
	l.want("0", "LEASE", "REVOKE", b)
	l.want("[mode free token 0 holders [] waiters 0]", "LOCK", "INFO", "x")
	l.want("[]", "LEASE", "LIST")
}

func TestLockShared(t *testing.T) {
	l := newLockLog(t)
	r1, r2, w, r3 := l.id("LEASE", "GRANT", "9000"), l.id("LEASE", "GRANT", "9000"), l.id("LEASE", "GRANT", "9000"), l.id("LEASE", "GRANT", "9000")
	t1 := l.id("LOCK", "ACQUIRE", "x", r1, "SHARED")
	t2 := l.id("LOCK", "TRYACQUIRE", "x", r2, "SHARED")
	l.want("(nil)", "LOCK", "TRYACQUIRE", "x", w)
	if r := l.do("LOCK", "ACQUIRE", "x", w, "TIMEOUT", "100"); !isWaiting(r) {
		t.Fatalf("writer: %s", show(r))
	}
	// A reader behind a queued writer waits (no writer starvation).
	l.want("(nil)", "LOCK", "TRYACQUIRE", "x", r3, "SHARED")
	if r := l.do("LOCK", "ACQUIRE", "x", r3, "SHARED"); !isWaiting(r) {
		t.Fatalf("reader behind writer: %s", show(r))
	}
	l.want("1", "LOCK", "RELEASE", "x", t1)
	l.want("[mode shared token "+t2+" holders [["+r2+" "+t2+"]] waiters 2]", "LOCK", "INFO", "x")
	l.want("1", "LOCK", "RELEASE", "x", t2)
	tw, _, _, _ := LockState(l.db, []byte("x"), mustU(t, w))
	if tw != l.index {
		t.Fatalf("writer not granted by the last shared release: %s", l.info("x"))
	}
	l.want("1", "LOCK", "RELEASE", "x", strconv.FormatUint(tw, 10))
	t3, _, _, _ := LockState(l.db, []byte("x"), mustU(t, r3))
	if t3 != l.index {
		t.Fatalf("reader not granted after the writer: %s", l.info("x"))
	}
}

func TestLockSharedCancelOfExclusiveHeadGrantsReaders(t *testing.T) {
	l := newLockLog(t)
	r1, w, r2 := l.id("LEASE", "GRANT", "9000"), l.id("LEASE", "GRANT", "9000"), l.id("LEASE", "GRANT", "9000")
	l.id("LOCK", "ACQUIRE", "x", r1, "SHARED")
	l.do("LOCK", "ACQUIRE", "x", w)
	l.do("LOCK", "ACQUIRE", "x", r2, "SHARED")
	l.want("1", "LOCK", "CANCEL", "x", w)
	cancelIdx := l.index
	l.want("0", "LOCK", "CANCEL", "x", w)
	if tok, _, _, _ := LockState(l.db, []byte("x"), mustU(t, r2)); tok != cancelIdx {
		t.Fatalf("the reader behind a cancelled writer was not granted: %s", l.info("x"))
	}
}

func TestLockFencedWrites(t *testing.T) {
	l := newLockLog(t)
	a, b := l.id("LEASE", "GRANT", "9000"), l.id("LEASE", "GRANT", "9000")
	ta := l.id("LOCK", "ACQUIRE", "x", a)
	l.want("OK", "LOCK", "FENCED", "x", ta, "SET", "res", "a")
	l.want("1", "LOCK", "RELEASE", "x", ta)
	tb := l.id("LOCK", "ACQUIRE", "x", b)
	l.want("ERR<FENCED token "+ta+" is not the current holder of lock 'x'; nothing was written>", "LOCK", "FENCED", "x", ta, "SET", "res", "stale")
	l.want("a", "GET", "res")
	l.want("2", "LOCK", "FENCED", "x", tb, "RPUSH", "list", "p", "q")
	l.want("ERR<ERR LOCK FENCED cannot run 'lock'>", "LOCK", "FENCED", "x", tb, "LOCK", "RELEASE", "x", tb)
	l.want("ERR<ERR wrong number of arguments for 'set' command>", "LOCK", "FENCED", "x", tb, "SET", "k")
	// Leases and locks are not keys: FLUSHALL keeps them (and the lease's keys go).
	l.want("OK", "SET", "leased", "v", "LEASE", b)
	l.want("OK", "FLUSHALL")
	l.want("0", "EXISTS", "leased")
	l.want("[mode exclusive token "+tb+" holders [["+b+" "+tb+"]] waiters 0]", "LOCK", "INFO", "x")
	l.want("["+a+" "+b+"]", "LEASE", "LIST")
}

func TestLockTimeoutAndTransactions(t *testing.T) {
	l := newLockLog(t)
	a, b := l.id("LEASE", "GRANT", "9000"), l.id("LEASE", "GRANT", "9000")
	ta := l.id("LOCK", "ACQUIRE", "x", a)
	l.do("LOCK", "ACQUIRE", "x", b)
	l.want("(nil)", "KVORUM.LOCKTIMEOUT", "x", b) // gave up while still queued: leaves the queue
	l.want("[mode exclusive token "+ta+" holders [["+a+" "+ta+"]] waiters 0]", "LOCK", "INFO", "x")
	l.do("LOCK", "ACQUIRE", "x", b)
	l.want("1", "LOCK", "RELEASE", "x", ta)
	tb, _, _, _ := LockState(l.db, []byte("x"), mustU(t, b))
	// Granted before its timeout was applied: the timeout returns the token.
	l.want(strconv.FormatUint(tb, 10), "KVORUM.LOCKTIMEOUT", "x", b)
	// In a transaction nobody can park: ACQUIRE acts as TRYACQUIRE.
	exec := EncodeExec(nil, nil, [][][]byte{toArgs("LOCK", "ACQUIRE", "x", a), toArgs("LOCK", "INFO", "x")})
	strs := make([]string, len(exec))
	for i, s := range exec {
		strs[i] = string(s)
	}
	got := show(l.do(strs...))
	if want := "[(nil) [mode exclusive token " + strconv.FormatUint(tb, 10) + " holders [[" + b + " " + strconv.FormatUint(tb, 10) + "]] waiters 0]]"; got != want {
		t.Fatalf("acquire in a transaction: %s, want %s", got, want)
	}
}

func TestLockAndLeaseBadInput(t *testing.T) {
	l := newLockLog(t)
	for _, c := range []struct {
		want string
		args []string
	}{
		{"ERR<ERR invalid lease TTL: want milliseconds in 1..86400000>", []string{"LEASE", "GRANT", "0"}},
		{"ERR<ERR invalid lease TTL: want milliseconds in 1..86400000>", []string{"LEASE", "GRANT", "x"}},
		{"ERR<ERR invalid lease id>", []string{"LEASE", "KEEPALIVE", "-1"}},
		{"ERR<ERR wrong number of arguments for 'lease|list' command>", []string{"LEASE", "LIST", "x"}},
		{"ERR<ERR unknown subcommand 'NOPE'. Try LEASE GRANT|KEEPALIVE|REVOKE|TTL|LIST.>", []string{"LEASE", "NOPE"}},
		{"ERR<ERR syntax error>", []string{"LOCK", "ACQUIRE", "x", "5", "FOREVER"}},
		{"ERR<ERR syntax error>", []string{"LOCK", "TRYACQUIRE", "x", "5", "TIMEOUT", "10"}},
		{"ERR<ERR invalid TIMEOUT: want milliseconds >= 0>", []string{"LOCK", "ACQUIRE", "x", "5", "TIMEOUT", "-1"}},
		{"ERR<ERR invalid WAIT: want milliseconds >= 0>", []string{"LOCK", "ACQUIRE", "x", "5", "wait", "x"}},
		{"ERR<ERR syntax error>", []string{"LOCK", "TRYACQUIRE", "x", "5", "WAIT", "10"}},
		{"ERR<ERR invalid fencing token>", []string{"LOCK", "RELEASE", "x", "0"}},
		{"ERR<ERR wrong number of arguments for 'lock' command>", []string{"LOCK", "INFO"}},
		{"ERR<ERR syntax error>", []string{"SET", "k", "v", "LEASE"}},
		{"ERR<ERR invalid lease id>", []string{"SET", "k", "v", "LEASE", "abc"}},
		{"ERR<NOLEASE lease 7 not found (expired or revoked)>", []string{"LOCK", "ACQUIRE", "x", "7"}},
	} {
		l.want(c.want, c.args...)
	}
	l.want("0", "EXISTS", "k")
	l.want("[]", "LEASE", "LIST")
}

func isWaiting(r Reply) bool {
	_, ok := LockWaiting(r)
	return ok
}

// A lock's record outlives its release (rewriting it is cheaper than
// reading past a deletion), but not the leases that used it: once they are
// gone, no lock, queue or lease-place record is left.
func TestLockRecordsGoWithTheirLeases(t *testing.T) {
	l := newLockLog(t)
	count := func(prefix []byte) int {
		n := 0
		if err := iterPrefix(l.db, prefix, func(k, v []byte) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	a, b := l.id("LEASE", "GRANT", "5000"), l.id("LEASE", "GRANT", "5000")
	for range 3 {
		l.want("1", "LOCK", "RELEASE", "x", l.id("LOCK", "ACQUIRE", "x", a))
	}
	l.id("LOCK", "ACQUIRE", "y", b)
	if r := l.do("LOCK", "ACQUIRE", "y", a); !isWaiting(r) {
		t.Fatalf("a on y: %s, want queued", show(r))
	}
	if n := count(lockPrefix); n != 2 {
		t.Fatalf("%d lock records with x free and y held, want 2", n)
	}
	l.want("[mode free token 0 holders [] waiters 0]", "LOCK", "INFO", "x")
	l.want("1", "LEASE", "REVOKE", a)
	if n := count(lockPrefix); n != 1 {
		t.Fatalf("%d lock records after a (x's only user) was revoked, want y's alone", n)
	}
	if n := count(queuePrefix); n != 0 {
		t.Fatalf("%d queue records after the only waiter's lease was revoked", n)
	}
	l.want("1", "LEASE", "REVOKE", b)
	for _, p := range [][]byte{lockPrefix, queuePrefix, ownedPrefix, leasePrefix} {
		if n := count(p); n != 0 {
			t.Errorf("%d records under %q left after every lease was revoked", n, p)
		}
	}
}

// TestLockGrantInTheQueueingEntry: a waiter queued and granted in the same
// entry (a release batched after its acquire) gets a token above the
// number its waiting reply carries, which is what the parked node compares
// (server.lockOutcome: granted when the holder token is above it). With
// the entry's index there, the grant's token equalled it and the client
// stayed parked while holding the lock.
func TestLockGrantInTheQueueingEntry(t *testing.T) {
	l := newLockLog(t)
	a, b := l.id("LEASE", "GRANT", "5000"), l.id("LEASE", "GRANT", "5000")
	tb := l.id("LOCK", "ACQUIRE", "m", b)
	// One entry: A queues behind B, then B releases (granting A).
	l.index++
	batch := l.db.NewIndexedBatch()
	defer batch.Close()
	env := Env{Now: 1_000_000 + int64(l.index), Index: l.index, Effects: &Effects{}}
	w := Apply(batch, toArgs("LOCK", "ACQUIRE", "m", a), env)
	queued, ok := LockWaiting(w)
	if !ok {
		t.Fatalf("acquire behind a holder: %s, want a waiting reply", show(w))
	}
	env.Seq = 1
	if r := Apply(batch, toArgs("LOCK", "RELEASE", "m", tb), env); show(r) != "1" {
		t.Fatalf("release: %s", show(r))
	}
	if err := batch.Commit(pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	tok, waiting, alive, err := LockState(l.db, []byte("m"), mustU(t, a))
	if err != nil || waiting || !alive {
		t.Fatalf("lock state of A: token %d waiting %v alive %v err %v", tok, waiting, alive, err)
	}
	if tok <= queued {
		t.Fatalf("A was granted token %d in the entry that queued it; its waiting reply says %d: the parked client would never see its grant", tok, queued)
	}
	// An earlier grant of the same lease reads as earlier: B's token is at
	// or below what A's waiting reply carries.
	if mustU(t, tb) > queued {
		t.Fatalf("B's earlier token %s is above A's waiting number %d", tb, queued)
	}
}
