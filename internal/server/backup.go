package server

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/admin"
	"github.com/kvorum/kvorum/internal/kv"
	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/storage"
	"github.com/kvorum/kvorum/internal/store"
)

// Backups (kvorum ctl backup) and restores (kvorum restore).
//
// A backup is the state machine data of every range at one moment, read
// from one Pebble snapshot pinned after a read barrier on each range: it
// holds every write acknowledged before the backup was asked for, from
// whichever node. Restore seeds the data directory of one member of a new
// cluster with it; every member is seeded from the same file with the same
// --initial-cluster, so they start from the same state at the same log
// position, as the members of a brand-new cluster do (BootstrapRange).
//
// The file keeps the format of a one-range backup (storage.WriteBackup:
// one snapshot stream, KVSNAP1 keys), which the previous release reads:
// the ranges are written as the one range a restore bootstraps, covering
// every slot, at the highest applied index of all ranges, with the
// ranges' replicated range-local keys merged into one set (mergeRangeKeys).
// In slice 1 every node holds every range (docs/ranges.md §3), so one
// node's snapshot holds them all; a node that does not is refused.

// nodeBackup is a pinned backup of the node's data.
type nodeBackup struct {
	n    *Node
	snap *pebble.Snapshot
	hdr  storage.BackupHeader
	// desc is the one range a restore bootstraps (range 1's descriptor,
	// every slot), and local the ranges' own replicated range-local keys,
	// merged (written first, in key order).
	desc  *storage.Descriptor
	local []kvPair
}

type kvPair struct{ k, v []byte }

// Backup pins the node's state once it has applied every write committed
// before the call on every range (a read barrier per range: it fails
// without a leader).
func (n *Node) Backup(ctx context.Context) (*nodeBackup, error) {
	for _, rg := range n.rangeOrder(false) {
		if r := n.store.Replica(rg); r != nil {
			if rep := n.readBarrierOn(ctx, r); rep != nil {
				return nil, fmt.Errorf("%w: range %d: %s", admin.ErrNoLeader, rg, rep.Str)
			}
		}
	}
	snap := n.db.NewSnapshot()
	b, err := n.pinBackup(snap)
	if err != nil {
		_ = snap.Close()
		return nil, err
	}
	return b, nil
}

// pinBackup reads what the backup needs besides the data from snap: every
// range's descriptor and applied state, and their replicated range-local
// keys.
func (n *Node) pinBackup(snap *pebble.Snapshot) (*nodeBackup, error) {
	descs, err := storage.LoadDescriptors(snap)
	if err != nil {
		return nil, err
	}
	if err := coverAllSlots(descs); err != nil {
		return nil, err
	}
	var applied storage.AppliedState
	var first *storage.Descriptor
	perRange := make([][]kvPair, 0, len(descs))
	for _, d := range descs {
		st, err := storage.LoadAppliedState(snap, d.RangeID)
		if err != nil {
			return nil, err
		}
		if st.Index == 0 {
			return nil, fmt.Errorf("this node holds no data of range %d yet", d.RangeID)
		}
		if st.Index > applied.Index {
			applied = st
		}
		if d.RangeID == firstRange {
			first = d
		}
		var pairs []kvPair
		rs, re := storage.ReplicatedRangeSpan(d.RangeID)
		err = storage.EmitSpan(snap, rs, re, func(k, v []byte) error {
			pairs = append(pairs, kvPair{append([]byte(nil), k...), append([]byte(nil), v...)})
			return nil
		})
		if err != nil {
			return nil, err
		}
		perRange = append(perRange, pairs)
	}
	if first == nil {
		return nil, errors.New("this node holds no descriptor of range 1 yet")
	}
	desc := first.Clone().FullSlots()
	return &nodeBackup{n: n, snap: snap, desc: desc, local: mergeRangeKeys(firstRange, perRange), hdr: storage.BackupHeader{
		ClusterID: n.clusterID, NodeID: uint64(n.id), RangeID: uint64(firstRange),
		Index: applied.Index, Term: applied.Term,
		Created: time.Now().UTC().Format(time.RFC3339), Version: Version,
	}}, nil
}

// coverAllSlots checks that descs (in range id order) own every hash slot
// once: that a backup of them misses no key.
func coverAllSlots(descs []*storage.Descriptor) error {
	if len(descs) == 0 {
		return errors.New("this node holds no range descriptor yet")
	}
	byStart := slices.Clone(descs)
	slices.SortFunc(byStart, func(a, b *storage.Descriptor) int { return cmp.Compare(a.StartSlot, b.StartSlot) })
	next := uint16(0)
	for _, d := range byStart {
		if d.StartSlot != next || d.EndSlot < d.StartSlot {
			return fmt.Errorf("this node's ranges do not cover the hash slots exactly once (range %d owns [%d, %d), expected it to start at %d); back up from a node that holds every range", d.RangeID, d.StartSlot, d.EndSlot, next)
		}
		next = d.EndSlot
	}
	if next < slot.Count {
		return fmt.Errorf("this node's ranges end at slot %d, not %d; back up from a node that holds every range", next, slot.Count)
	}
	return nil
}

// mergeRangeKeys merges the replicated range-local keys of several
// ranges (perRange, each range's pairs in key order) into one set for
// range to, the one range a restore bootstraps, in key order. By name:
//
//   - 'v' (the collection version counter), 'f' (the log index of the
//     last FLUSHALL) and 'D' (the tombstone floor: first epoch kept, then
//     the index of the collection that set it): the largest value. They
//     are big-endian, so the largest is the largest by bytes (a floor of
//     format 1's 4 bytes, the epoch alone, sorts below a 12-byte one of
//     the same epoch).
//     'v' must be the max: a collection created after the restore, in any
//     slot, must get a version above every version its key's elements were
//     ever written with (versions only grow per key). For 'f' and 'D' any
//     of the values would do, and the max is as good: every log index
//     stored in any range's data (WATCH tombstones and registrations, 'f',
//     'D') is at most that range's applied index, so at most the backup's
//     index, where the restored log starts (BootstrapRangeAt); a WATCH
//     after the restore is stamped with a later index, so none of these
//     old indexes can abort it (kv/multi.go watchUnchanged: a tombstone,
//     a collection or a FLUSHALL aborts only if its index is above the
//     stamp), and a floor epoch above a range's own only skips reading
//     that range's older tombstones, which are all below any such stamp.
//   - any other name (a per-range copy of state range 1 holds
//     authoritatively, such as the configuration): range 1's value if it
//     has one, else that of the lowest range id that has one.
func mergeRangeKeys(to storage.RangeID, perRange [][]kvPair) []kvPair {
	merged := map[string][]byte{}
	fromFirst := map[string]bool{}
	for _, pairs := range perRange {
		for _, p := range pairs {
			id, name, ok := storage.ParseReplicatedRangeKey(p.k)
			if !ok {
				continue
			}
			key := string(name)
			old, had := merged[key]
			switch {
			case !had:
				merged[key], fromFirst[key] = p.v, id == firstRange
			case len(name) == 1 && (name[0] == 'v' || name[0] == 'f' || name[0] == 'D'):
				if bytes.Compare(p.v, old) > 0 {
					merged[key] = p.v
				}
			case id == firstRange && !fromFirst[key]:
				merged[key], fromFirst[key] = p.v, true
			}
		}
	}
	out := make([]kvPair, 0, len(merged))
	for name, v := range merged {
		out = append(out, kvPair{storage.ReplicatedRangeKey(to, []byte(name)), v})
	}
	slices.SortFunc(out, func(a, b kvPair) int { return bytes.Compare(a.k, b.k) })
	return out
}

func (b *nodeBackup) Index() uint64 { return b.hdr.Index }
func (b *nodeBackup) Term() uint64  { return b.hdr.Term }
func (b *nodeBackup) Close() error  { return b.snap.Close() }

// WriteTo streams the backup.
func (b *nodeBackup) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	err := storage.WriteBackup(cw, b.hdr, b.desc, func(emit func(k, v []byte) error) error {
		// What storage.EmitRange emits for the one range of b.desc: its
		// replicated range-local keys (here every range's, merged), then
		// its span (every slot and the global hidden keys).
		for _, p := range b.local {
			if err := emit(p.k, p.v); err != nil {
				return err
			}
		}
		start, end := b.n.machine.Span(b.desc)
		return storage.EmitSpan(b.snap, start, end, emit)
	})
	return cw.n, err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Backup implements admin.BackupAPI.
func (a *adminAPI) Backup(ctx context.Context) (admin.Backup, error) {
	b, err := (*Node)(a).Backup(ctx)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// RestoreConfig says what Restore seeds.
type RestoreConfig struct {
	// From is the backup.
	From io.Reader
	// DataDir is the new node's data directory: it must not exist or be
	// empty. The data is written next to it first and moved in place only
	// once the whole backup verified.
	DataDir string
	// ID and InitialCluster are the new node's id and the new cluster's
	// members, as `kvorum start` will be given them.
	ID             uint64
	InitialCluster map[uint64]string
	Logger         *slog.Logger
}

// Restore seeds cfg.DataDir with the backup read from cfg.From. It changes
// nothing if the backup is damaged or the directory is in use.
func Restore(cfg RestoreConfig) (storage.BackupInfo, error) {
	var info storage.BackupInfo
	if cfg.ID == 0 {
		return info, errors.New("--id is required")
	}
	if _, ok := cfg.InitialCluster[cfg.ID]; !ok {
		return info, fmt.Errorf("--initial-cluster does not list this node (id %d)", cfg.ID)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := checkEmptyDir(cfg.DataDir); err != nil {
		return info, err
	}
	partial := fmt.Sprintf("%s.restoring-%d", filepath.Clean(cfg.DataDir), os.Getpid())
	_ = os.RemoveAll(partial)
	db, err := storage.Open(partial, storage.Options{Logger: cfg.Logger})
	if err != nil {
		return info, err
	}
	ok := false
	defer func() {
		if db != nil {
			_ = db.Close()
		}
		if !ok {
			_ = os.RemoveAll(partial)
		}
	}()
	info, err = seed(db, cfg)
	if err != nil {
		return info, err
	}
	err = db.Close()
	db = nil
	if err != nil {
		return info, err
	}
	if err := os.Remove(cfg.DataDir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return info, err
	}
	if err := os.Rename(partial, cfg.DataDir); err != nil {
		return info, err
	}
	ok = true
	return info, syncDir(filepath.Dir(filepath.Clean(cfg.DataDir)))
}

// seed writes the backup's pairs to db, then the new cluster's bootstrap
// state and the node's identity, once the backup verified.
func seed(db *pebble.DB, cfg RestoreConfig) (storage.BackupInfo, error) {
	b := db.NewBatch()
	defer func() { b.Close() }()
	info, err := storage.ReadBackup(cfg.From, func(k, v []byte) error {
		if err := b.Set(k, v, nil); err != nil {
			return err
		}
		if b.Len() < 4<<20 {
			return nil
		}
		if err := storage.Commit(b, pebble.NoSync); err != nil {
			return err
		}
		b.Close()
		b = db.NewBatch()
		return nil
	})
	if err != nil {
		return info, err
	}
	desc := (&storage.Descriptor{RangeID: storage.RangeID(info.Header.RangeID)}).FullSlots()
	if desc.RangeID == 0 {
		desc.RangeID = firstRange
	}
	for id, addr := range cfg.InitialCluster {
		desc.Replicas = append(desc.Replicas, storage.ReplicaDescriptor{NodeID: storage.NodeID(id), PeerAddr: addr})
	}
	sortReplicas(desc.Replicas)
	if err := store.BootstrapRangeAt(b, desc, info.Header.Index); err != nil {
		return info, err
	}
	if err := storage.SetIdent(b, storage.NodeID(cfg.ID), restoredClusterID(cfg.InitialCluster, info.Sum)); err != nil {
		return info, err
	}
	// ReadBackup gave the pairs in this release's layout (converting a
	// backup of an earlier one).
	if err := storage.SetStoreFormat(b, kv.StoreFormat); err != nil {
		return info, err
	}
	return info, storage.Commit(b, pebble.Sync)
}

// restoredClusterID is the cluster id of a cluster restored from the
// backup whose digest is sum: members seeded from different backups (or
// with different member lists) get different ids, so their transports
// refuse each other instead of joining states that differ.
func restoredClusterID(members map[uint64]string, sum [32]byte) uint64 {
	h := clusterIDOf(members)
	for _, c := range "restored:" + hex.EncodeToString(sum[:]) {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// checkEmptyDir refuses a data directory that holds anything.
func checkEmptyDir(dir string) error {
	if dir == "" {
		return errors.New("--data-dir is required")
	}
	names, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case len(names) > 0:
		return fmt.Errorf("data directory %s is not empty: restore seeds a new node only (move it away, or pick another --data-dir)", dir)
	}
	return nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
