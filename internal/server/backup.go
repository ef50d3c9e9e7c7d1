package server

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/admin"
	"github.com/kvorum/kvorum/internal/kv"
	"github.com/kvorum/kvorum/internal/storage"
	"github.com/kvorum/kvorum/internal/store"
)

// Backups (kvorum ctl backup) and restores (kvorum restore).
//
// A backup is the first range's state machine data at one applied index,
// read from a Pebble snapshot pinned after a read barrier: it holds every
// write acknowledged before the backup was asked for, from whichever node.
// Restore seeds the data directory of one member of a new cluster with
// it; every member is seeded from the same file with the same
// --initial-cluster, so they start from the same state at the same log
// position, as the members of a brand-new cluster do (BootstrapRange).

// nodeBackup is a pinned backup of the node's data.
type nodeBackup struct {
	n    *Node
	snap *pebble.Snapshot
	hdr  storage.BackupHeader
	desc *storage.Descriptor
}

// Backup pins the node's state once it has applied every write committed
// before the call (a read barrier: it fails without a leader).
func (n *Node) Backup(ctx context.Context) (*nodeBackup, error) {
	if rep := n.readBarrier(ctx); rep != nil {
		return nil, fmt.Errorf("%w: %s", admin.ErrNoLeader, rep.Str)
	}
	snap := n.db.NewSnapshot()
	applied, err := storage.LoadAppliedState(snap, firstRange)
	if err == nil && applied.Index == 0 {
		err = errors.New("this node holds no data yet")
	}
	var desc *storage.Descriptor
	if err == nil {
		var ok bool
		if desc, ok, err = storage.LoadDescriptor(snap, firstRange); err == nil && !ok {
			err = errors.New("this node holds no range descriptor yet")
		}
	}
	if err != nil {
		_ = snap.Close()
		return nil, err
	}
	return &nodeBackup{n: n, snap: snap, desc: desc, hdr: storage.BackupHeader{
		ClusterID: n.clusterID, NodeID: uint64(n.id), RangeID: uint64(firstRange),
		Index: applied.Index, Term: applied.Term,
		Created: time.Now().UTC().Format(time.RFC3339), Version: Version,
	}}, nil
}

func (b *nodeBackup) Index() uint64 { return b.hdr.Index }
func (b *nodeBackup) Term() uint64  { return b.hdr.Term }
func (b *nodeBackup) Close() error  { return b.snap.Close() }

// WriteTo streams the backup.
func (b *nodeBackup) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	err := storage.WriteBackup(cw, b.hdr, b.desc, func(emit func(k, v []byte) error) error {
		return storage.EmitRange(b.snap, b.desc, b.n.machine.Span, emit)
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
