package kv

import (
	"bytes"
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/storage"
)

// The expiry index (Redis keeps the keys with a TTL in a dict of their
// own, `expires`): one per-slot hidden key per user key that has a
// deadline, in the key's slot (hidden.go, docs/ranges.md §2.3),
//
//	0x11 <slot:2> 0x00 0x00 'e' <deadline ms:8 BE> <user key>
//
// with an empty value. Per slot, because a range's state must be one span
// of slots: a snapshot of a range (storage.EmitSpan of its slot span)
// carries its keys' entries, a split divides them with the slots, and
// only the range owning a slot writes its entries (replace and remove, at
// apply, on every replica), so apply stays deterministic per range.
//
// Within a slot the entries are in deadline order, so the keys of a slot
// expired at t are exactly its entries below 'e' <t+1>. A sweep would
// still seek every slot of its range; Deadlines (below) keeps each slot's
// earliest deadline in memory so that it seeks only the slots that are
// due.
//
// Format 1 kept one global index at 0x10 0x00 0x00 'e' …, and the
// progress of building it over older keys at 0x10 0x00 0x00 'E'. Format 2
// has no build: MigrateV2 writes the whole index from the metadata
// records, a KVSNAP1 snapshot's global entries are moved to their slots
// (V2Key), and every write keeps it. KVORUM.TTLINDEX is kept as a no-op
// for the entries a node of the previous release may have proposed.
const (
	slotTTL        = 'e' // per slot in format 2, global in format 1
	legacyTTLBuild = 'E' // format 1 only: the build's progress
)

// ttlHeadLen is the length of an index key before its user key.
const ttlHeadLen = slotHiddenLen + 8

func appendTTLKey(b []byte, deadline int64, k []byte) []byte {
	b = appendSlotHidden(b, slot.Of(k), slotTTL)
	b = binary.BigEndian.AppendUint64(b, uint64(deadline))
	return append(b, k...)
}

// ttlSlotPrefix is the head of slot s's index entries.
func ttlSlotPrefix(s uint16) []byte { return appendSlotHidden(nil, s, slotTTL) }

// indexTTL moves k's index key from deadline old to deadline now (either
// 0: none), and lowers the node's in-memory minimum of k's slot.
func (x *ctx) indexTTL(k []byte, old, now int64) error {
	if old == now {
		return nil
	}
	if old > 0 {
		x.tbuf = appendTTLKey(x.tbuf[:0], old, k)
		if err := x.w.Delete(x.tbuf, nil); err != nil {
			return err
		}
	}
	if now > 0 {
		x.tbuf = appendTTLKey(x.tbuf[:0], now, k)
		if x.deadlines != nil {
			x.deadlines.note(binary.BigEndian.Uint16(x.tbuf[1:]), now)
		}
		return x.w.Set(x.tbuf, nil, nil)
	}
	return nil
}

// Deadlines is a node's in-memory earliest deadline of each hash slot's
// expiry index, so that the sweeper seeks only the slots with a key due
// (docs/ranges.md §2.3): 16384 × 8 bytes per node, whatever the ranges.
//
// Each slot's value is a lower bound of its earliest entry: 0 means
// unknown (the sweeper seeks the slot and learns it: at start every slot
// is unknown, so the first sweep of a range seeks each of its slots
// once), noDeadline that the slot has no entry. An entry written lowers
// it; a deleted entry leaves it low until the sweeper, finding the slot
// due, seeks it and stores the head it finds. A replaced span (a
// snapshot) makes its slots unknown.
//
// Apply writes into a batch that is committed later, and the sweeper
// reads the DB from another goroutine. So apply's lowerings and resets
// wait (note, Reset) until the round is committed (Publish): a value
// never claims an entry the DB does not show yet. The sweeper stores what
// it read with a compare-and-swap from the value it loaded before
// reading (a lowering published meanwhile wins), and if a reset, or a
// lowering of an unknown slot (which the swap cannot see), was published
// meanwhile (gen), it makes the slot unknown again.
type Deadlines struct {
	min [slot.Count]atomic.Int64
	gen atomic.Uint64

	mu      sync.Mutex
	pending []slotDeadline // lowerings of the round being applied
	resets  [][2]uint16    // slot intervals replaced in the round
}

type slotDeadline struct {
	slot     uint16
	deadline int64
}

// dueHook, if set, runs in Due between reading a slot and storing its
// head (tests make a round commit there).
var dueHook func()

// noDeadline marks a slot without entries.
const noDeadline = int64(^uint64(0) >> 1)

// NewDeadlines returns every slot unknown.
func NewDeadlines() *Deadlines { return new(Deadlines) }

// note records, at apply, that slot s gets an entry at deadline.
func (d *Deadlines) note(s uint16, deadline int64) {
	d.mu.Lock()
	d.pending = append(d.pending, slotDeadline{s, deadline})
	d.mu.Unlock()
}

// ResetSpan records, at apply, that storage span [start, end) was
// replaced (a snapshot): its slots become unknown at the next Publish.
func (d *Deadlines) ResetSpan(start, end []byte) {
	lo, hi := spanSlots(start, end)
	if lo >= hi {
		return
	}
	d.mu.Lock()
	d.resets = append(d.resets, [2]uint16{lo, hi})
	d.mu.Unlock()
}

// spanSlots returns the slots whose index entries storage span
// [start, end) holds (all of them, or none, for spans not in 0x11).
func spanSlots(start, end []byte) (lo, hi uint16) {
	slotAt := func(k []byte, def uint16) uint16 {
		switch {
		case len(k) == 0 || k[0] < slotPrefix:
			return 0
		case k[0] > slotPrefix:
			return slot.Count
		case len(k) < keyHeadLen:
			return def
		}
		return binary.BigEndian.Uint16(k[1:])
	}
	lo, hi = slotAt(start, 0), slotAt(end, 0)
	if len(end) > keyHeadLen && end[0] == slotPrefix && hi < slot.Count {
		hi++ // the span ends inside slot hi: it holds some of its keys
	}
	return lo, hi
}

// Publish applies the round's resets and lowerings, once the round is
// committed (the state machine's Committed).
func (d *Deadlines) Publish() {
	d.mu.Lock()
	resets, pending := d.resets, d.pending
	d.resets, d.pending = d.resets[:0], d.pending[:0]
	if len(resets) > 0 {
		d.gen.Add(1)
		for _, r := range resets {
			for s := r[0]; s < r[1]; s++ {
				d.min[s].Store(0)
			}
		}
	}
	// A lowering of an unknown slot changes nothing, so a sweep that read
	// the slot before this round was committed could not see it in its
	// compare-and-swap from unknown: announce it (gen) before looking.
	for _, p := range pending {
		if d.min[p.slot].Load() == 0 {
			d.gen.Add(1)
			break
		}
	}
	for _, p := range pending {
		d.lower(p.slot, p.deadline)
	}
	d.mu.Unlock()
}

// lower makes slot s's minimum at most deadline (an unknown slot stays
// unknown: it may hold earlier entries).
func (d *Deadlines) lower(s uint16, deadline int64) {
	m := &d.min[s]
	for {
		cur := m.Load()
		if cur == 0 || cur <= deadline || m.CompareAndSwap(cur, deadline) {
			return
		}
	}
}

// Min returns slot s's known earliest deadline: 0 unknown, noDeadline none.
func (d *Deadlines) Min(s uint16) int64 { return d.min[s].Load() }

// Due returns up to limit keys of slots [lo, hi) whose deadline is <=
// nowMs, each slot's earliest first, and the number of slots it sought:
// only those whose minimum is due or unknown. It stores each sought
// slot's head. Safe with concurrent apply (see Deadlines).
func (d *Deadlines) Due(r pebble.Reader, lo, hi uint16, nowMs int64, limit int) (keys [][]byte, visited int, err error) {
	if nowMs <= 0 || lo >= hi {
		return nil, 0, nil
	}
	var it *pebble.Iterator
	defer func() {
		if it != nil {
			if cerr := it.Close(); err == nil {
				err = cerr
			}
		}
	}()
	for s := uint32(lo); s < uint32(hi) && len(keys) < limit; s++ {
		m := d.min[s].Load()
		if m == noDeadline || (m > 0 && m > nowMs) {
			continue
		}
		if it == nil {
			start, end := SlotSpan(lo, hi)
			if it, err = r.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end}); err != nil {
				return nil, visited, err
			}
		}
		visited++
		gen := d.gen.Load()
		var ks [][]byte
		head, err := slotDue(it, uint16(s), nowMs, limit-len(keys), &ks)
		if err != nil {
			return keys, visited, err
		}
		keys = append(keys, ks...)
		if dueHook != nil {
			dueHook()
		}
		d.min[s].CompareAndSwap(m, head)
		if d.gen.Load() != gen {
			// A snapshot replaced slots, or a round lowered unknown ones,
			// meanwhile: what was read may be stale, so read it again.
			d.min[s].Store(0)
		}
	}
	return keys, visited, nil
}

// slotDue appends to keys up to limit keys of slot s due at nowMs, and
// returns the slot's earliest deadline (noDeadline: no entry).
func slotDue(it *pebble.Iterator, s uint16, nowMs int64, limit int, keys *[][]byte) (head int64, err error) {
	p := ttlSlotPrefix(s)
	head = noDeadline
	for valid := it.SeekGE(p); valid; valid = it.Next() {
		k := it.Key()
		if !bytes.HasPrefix(k, p) || len(k) < ttlHeadLen {
			break
		}
		dl := int64(binary.BigEndian.Uint64(k[slotHiddenLen:]))
		if head == noDeadline {
			head = max(dl, 1)
		}
		if dl > nowMs || len(*keys) >= limit {
			break
		}
		*keys = append(*keys, bytes.Clone(k[ttlHeadLen:]))
	}
	return head, it.Error()
}

// ExpiredKeys returns up to limit user keys whose deadline is <= nowMs,
// earliest deadline first, from the expiry index of every slot (one seek
// per slot: for tests and tools; the sweeper uses Deadlines.Due).
func ExpiredKeys(r pebble.Reader, nowMs int64, limit int) (keys [][]byte, err error) {
	return ExpiredKeysIn(r, nil, nowMs, limit)
}

// ExpiredKeysIn is ExpiredKeys for the keys of range d's slots only (all
// of them: d nil or owning every slot).
func ExpiredKeysIn(r pebble.Reader, d *storage.Descriptor, nowMs int64, limit int) ([][]byte, error) {
	lo, hi := uint16(0), uint16(slot.Count)
	if ranged(d) {
		lo, hi = d.StartSlot, d.EndSlot
	}
	if nowMs <= 0 || limit <= 0 {
		return nil, nil
	}
	type due struct {
		deadline int64
		key      []byte
	}
	var all []due
	err := walkTTL(r, lo, hi, func(deadline int64, k []byte) bool {
		if deadline > nowMs {
			return false
		}
		all = append(all, due{deadline, bytes.Clone(k)})
		return true
	})
	slices.SortStableFunc(all, func(a, b due) int {
		if a.deadline != b.deadline {
			if a.deadline < b.deadline {
				return -1
			}
			return 1
		}
		return bytes.Compare(a.key, b.key)
	})
	keys := make([][]byte, 0, min(len(all), limit))
	for _, e := range all[:min(len(all), limit)] {
		keys = append(keys, e.key)
	}
	return keys, err
}

// walkTTL calls fn for the index entries of slots [lo, hi), each slot's in
// deadline order, with one seek per slot; fn returning false moves on to
// the next slot.
func walkTTL(r pebble.Reader, lo, hi uint16, fn func(deadline int64, k []byte) bool) (err error) {
	start, end := SlotSpan(lo, hi)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	for s := uint32(lo); s < uint32(hi); s++ {
		p := ttlSlotPrefix(uint16(s))
		for valid := it.SeekGE(p); valid; valid = it.Next() {
			k := it.Key()
			if !bytes.HasPrefix(k, p) || len(k) < ttlHeadLen {
				break
			}
			if !fn(int64(binary.BigEndian.Uint64(k[slotHiddenLen:])), k[ttlHeadLen:]) {
				break
			}
		}
	}
	return it.Error()
}

// cmdTTLIndex is KVORUM.TTLINDEX, which built format 1's global index
// over keys written before it existed. Format 2's index is complete by
// construction (see the top of this file), so it is a no-op replying 0
// ("the index is built"), which is what a proposer of the previous
// release waits for.
func cmdTTLIndex(_ *ctx, _ [][]byte) Reply { return Int(0) }
