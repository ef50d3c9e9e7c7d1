package kv

import (
	"encoding/binary"
	"errors"
	"strconv"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/lockargs"
)

// Leases (issue 7; docs/design-locks.md).
//
// A lease is a replicated record with a TTL. Its holder keeps it alive
// with LEASE KEEPALIVE; keys (SET ... LEASE id) and locks (LOCK ACQUIRE
// name id) belong to it and go with it when it is revoked or expires.
//
// Expiry is not decided here: Apply has no clock it may trust for that
// (the entry's timestamp is the leader's wall clock, which can jump). The
// leader decides on its monotonic clock (package server) and proposes
// KVORUM.LEASEEXPIRE id renewal, which expires the lease only if its last
// renewal is still the one the leader timed: a KEEPALIVE applied in
// between wins the race, on every replica alike.
//
// Hidden keys (below every user key, carried by snapshots):
//
//	'T'                        uint64: the last lease id or fencing token handed out
//	'L' <id:8>                 lease: ttl ms (8), renewal index (8), renewal time ms (8)
//	'A' <id:8> 'k' <user key>  a key attached to the lease: the key's mod at attach time (8)
//	'A' <id:8> 'l' <lock name> the lease holds (value 0) or waits for (value: waiter seq) the lock; all ones: neither any more
//
// Lease ids and fencing tokens come from one counter: max(previous+1,
// log index of the entry), so they increase strictly across failovers and
// restarts and read roughly as the Raft index of the grant.

var (
	counterKey  = []byte{userPrefix, 0x00, 0x00, 'T'}
	leasePrefix = []byte{userPrefix, 0x00, 0x00, 'L'}
	ownedPrefix = []byte{userPrefix, 0x00, 0x00, 'A'}
)

// MaxLeaseTTL bounds LEASE GRANT's TTL (one day, in ms).
const MaxLeaseTTL = lockargs.MaxLeaseTTL

func init() {
	defParsed("lease", -2, "write noscript", 0, 0, 0, "lease", "Leases: GRANT ttl-ms | KEEPALIVE id | REVOKE id | TTL id | LIST.", lockargs.ParseLease, cmdLease)
	table["lease"].spec.Extension = true
	table["lease"].readOnly = func(args [][]byte) bool { return len(args) > 1 && (eq(args[1], "TTL") || eq(args[1], "LIST")) }
	def("kvorum.leaseexpire", -3, "write", 0, 0, 0, "lease", "Internal: expires leases whose renewal the leader timed out.", cmdLeaseExpire, nil)
	table["kvorum.leaseexpire"].internal = true
	specList = specList[:len(specList)-1]
}

func errNoLease(id uint64) Reply {
	return Error("NOLEASE lease " + strconv.FormatUint(id, 10) + " not found (expired or revoked)")
}

func cmdLease(x *ctx, args [][]byte, a lockargs.Lease) Reply {
	switch a.Sub {
	case "grant":
		id, err := x.nextToken()
		if err != nil {
			return errReply(err)
		}
		if err := x.putLease(id, lease{ttl: a.TTL, renewIdx: x.index, renewTs: x.now}); err != nil {
			return errReply(err)
		}
		x.leaseEvent(id, a.TTL)
		return Int(int64(id))
	case "keepalive", "revoke", "ttl":
		l, ok, err := x.getLease(a.ID)
		switch {
		case err != nil:
			return errReply(err)
		case !ok && a.Sub == "keepalive":
			return errNoLease(a.ID)
		case !ok && a.Sub == "revoke":
			return Int(0)
		case !ok:
			return Int(-2)
		case a.Sub == "keepalive":
			l.renewIdx, l.renewTs = x.index, x.now
			if err := x.putLease(a.ID, l); err != nil {
				return errReply(err)
			}
			x.leaseEvent(a.ID, l.ttl)
			return Int(l.ttl)
		case a.Sub == "revoke":
			if err := x.dropLease(a.ID); err != nil {
				return errReply(err)
			}
			return Int(1)
		}
		// TTL: an estimate on the log's clock; the leader's monotonic
		// clock decides the actual expiry.
		return Int(max(0, min(l.ttl, l.renewTs+l.ttl-x.now)))
	default: // list
		var ids []Reply
		err := iterPrefix(x.r, leasePrefix, func(k, _ []byte) error {
			if len(k) == len(leasePrefix)+8 {
				ids = append(ids, Int(int64(binary.BigEndian.Uint64(k[len(leasePrefix):]))))
			}
			return nil
		})
		if err != nil {
			return errReply(err)
		}
		return Array(ids...)
	}
}

// cmdLeaseExpire: KVORUM.LEASEEXPIRE id renewal [id renewal ...]. Each
// lease is expired only if its last renewal is still `renewal`.
func cmdLeaseExpire(x *ctx, args [][]byte) Reply {
	if len(args)%2 != 1 {
		return wrongArity("kvorum.leaseexpire")
	}
	for _, a := range args[1:] { // all valid before anything is written
		if _, ok := lockargs.ParseID(a); !ok {
			return lockargs.ErrLeaseID
		}
	}
	var n int64
	for i := 1; i+1 < len(args); i += 2 {
		id, _ := lockargs.ParseID(args[i])
		renew, _ := lockargs.ParseID(args[i+1])
		l, ok, err := x.getLease(id)
		if err != nil {
			return errReply(err)
		}
		if !ok || l.renewIdx != renew {
			continue // gone already, or renewed since the leader timed it
		}
		if err := x.dropLease(id); err != nil {
			return errReply(err)
		}
		n++
	}
	return Int(n)
}

type lease struct {
	ttl      int64  // ms
	renewIdx uint64 // log index of the grant or last keep-alive
	renewTs  int64  // that entry's timestamp, Unix ms
}

func leaseKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), leasePrefix...), id)
}

func (x *ctx) getLease(id uint64) (lease, bool, error) {
	v, c, err := x.r.Get(leaseKey(id))
	if errors.Is(err, pebble.ErrNotFound) {
		return lease{}, false, nil
	}
	if err != nil {
		return lease{}, false, err
	}
	defer c.Close()
	if len(v) < 24 {
		return lease{}, false, errCorruptRecord
	}
	return lease{
		ttl:      int64(binary.BigEndian.Uint64(v)),
		renewIdx: binary.BigEndian.Uint64(v[8:]),
		renewTs:  int64(binary.BigEndian.Uint64(v[16:])),
	}, true, nil
}

func (x *ctx) putLease(id uint64, l lease) error {
	var v [24]byte
	binary.BigEndian.PutUint64(v[:], uint64(l.ttl))
	binary.BigEndian.PutUint64(v[8:], l.renewIdx)
	binary.BigEndian.PutUint64(v[16:], uint64(l.renewTs))
	return x.w.Set(leaseKey(id), v[:], nil)
}

// nextToken hands out the next lease id or fencing token.
func (x *ctx) nextToken() (uint64, error) {
	last, err := x.indexKey(counterKey)
	if err != nil {
		return 0, err
	}
	t := max(last+1, x.index)
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], t)
	return t, x.w.Set(counterKey, buf[:], nil)
}

// ownedKey is 'A' <id> <kind> <name>.
func ownedKey(id uint64, kind byte, name []byte) []byte {
	b := make([]byte, 0, len(ownedPrefix)+9+len(name))
	b = append(b, ownedPrefix...)
	b = binary.BigEndian.AppendUint64(b, id)
	b = append(b, kind)
	return append(b, name...)
}

// attachKey records that user key k, just written by this entry, belongs
// to lease id.
func (x *ctx) attachKey(id uint64, k []byte) error {
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], x.index)
	return x.w.Set(ownedKey(id, 'k', k), v[:], nil)
}

// dropLease deletes lease id with everything it owns: attached keys that
// were not written since they were attached, and its places in locks
// (holders are released and the next waiters granted, in this apply).
func (x *ctx) dropLease(id uint64) error {
	prefix := ownedKey(id, 0, nil)
	prefix = prefix[:len(prefix)-1]
	type owned struct {
		kind byte
		name []byte
		val  uint64
	}
	var all []owned
	err := iterPrefix(x.r, prefix, func(k, v []byte) error {
		if len(k) <= len(prefix) || len(v) != 8 {
			return nil
		}
		all = append(all, owned{k[len(prefix)], append([]byte(nil), k[len(prefix)+1:]...), binary.BigEndian.Uint64(v)})
		return nil
	})
	if err != nil {
		return err
	}
	for _, o := range all {
		switch o.kind {
		case 'k':
			rec, ok, err := x.rawHeader(o.name)
			if err != nil {
				return err
			}
			if ok && rec.mod == o.val { // not written since it was attached: a "del" event
				if err := x.del(o.name); err != nil {
					return err
				}
			}
		case 'l':
			if o.val != ownedNone { // else it left this lock earlier
				if err := x.lockDropLease(o.name, id, o.val); err != nil {
					return err
				}
			}
			if err := x.dropFreeLock(o.name); err != nil {
				return err
			}
		}
		if err := x.w.Delete(ownedKey(id, o.kind, o.name), nil); err != nil {
			return err
		}
	}
	x.leaseEvent(id, 0)
	return x.w.Delete(leaseKey(id), nil)
}

// leaseEvent records for the node (Effects.Leases) that lease id was
// renewed by this entry (ttl > 0) or is gone (ttl 0).
func (x *ctx) leaseEvent(id uint64, ttl int64) { x.fx.lease(id, x.index, ttl) }

// iterPrefix calls fn with every key and value under prefix, in order.
// The slices are valid only during the call.
func iterPrefix(r pebble.Reader, prefix []byte, fn func(k, v []byte) error) error {
	return walkRange(r, prefix, prefixEnd(prefix), nil, false, func(it *pebble.Iterator) (bool, error) {
		v, err := it.ValueAndErr()
		if err != nil {
			return false, err
		}
		return true, fn(it.Key(), v)
	})
}

// LeaseInfo is a lease as the leader's expiry loop sees it.
type LeaseInfo struct {
	ID       uint64
	TTLMs    int64
	RenewIdx uint64
}

// Leases returns every lease in r.
func Leases(r pebble.Reader) ([]LeaseInfo, error) {
	var out []LeaseInfo
	err := iterPrefix(r, leasePrefix, func(k, v []byte) error {
		if len(k) != len(leasePrefix)+8 || len(v) < 24 {
			return nil
		}
		out = append(out, LeaseInfo{
			ID:       binary.BigEndian.Uint64(k[len(leasePrefix):]),
			TTLMs:    int64(binary.BigEndian.Uint64(v)),
			RenewIdx: binary.BigEndian.Uint64(v[8:]),
		})
		return nil
	})
	return out, err
}

// LeaseExpireCommand builds the internal command that expires the given
// leases if their renewals are still the ones given.
func LeaseExpireCommand(ls []LeaseInfo) [][]byte {
	cmd := make([][]byte, 0, 1+2*len(ls))
	cmd = append(cmd, []byte("KVORUM.LEASEEXPIRE"))
	for _, l := range ls {
		cmd = append(cmd, strconv.AppendUint(nil, l.ID, 10), strconv.AppendUint(nil, l.RenewIdx, 10))
	}
	return cmd
}
