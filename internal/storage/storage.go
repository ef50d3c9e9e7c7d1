package storage

import (
	"fmt"
	"log/slog"
	"strconv"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/atomicfs"
)

// Open opens (creating if needed) the node's Pebble store in dir on fs.
func Open(dir string, fs vfs.FS, logger *slog.Logger) (*pebble.DB, error) {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("storage: create %s: %w", dir, err)
	}
	// Pebble would drop synced records after a damaged point of the newest
	// WAL as a torn tail when the proof of corruption sits in the same
	// 32 KiB block; look for it first (see wal.go).
	if err := checkWALTail(fs, dir, logger); err != nil {
		return nil, err
	}
	opts := &pebble.Options{
		FS:     fs,
		Logger: pebbleLogger{logger},
		// FormatWALSyncChunks makes every WAL chunk carry the offset up to
		// which the log was synced when it was written. Without it Pebble
		// cannot tell a corrupted record in the newest WAL from a torn tail
		// and silently drops every (synced) record after it (open.go,
		// replayWAL; record.Reader.readAheadForCorruption). An existing
		// store is ratcheted up to it at Open.
		FormatMajorVersion: pebble.FormatWALSyncChunks,
		// The Raft log is written and deleted in order; a larger memtable
		// lets most log entries die before they are flushed.
		MemTableSize:                64 << 20,
		MemTableStopWritesThreshold: 4,
		L0CompactionThreshold:       4,
		L0StopWritesThreshold:       24,
		MaxOpenFiles:                1000,
	}
	before := formatOnDisk(fs, dir)
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, openError(fs, dir, err)
	}
	// Open creates its new WAL before it ratchets the format version
	// (open.go: wal manager Create, then ratchetFormatMajorVersionLocked):
	// in a store this Open created or upgraded, that WAL has no sync
	// chunks. A flush rotates to a WAL that has them.
	if before < pebble.FormatWALSyncChunks {
		if err := db.Flush(); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("storage: open %s: rotate the write-ahead log: %w", dir, err)
		}
	}
	return db, nil
}

// formatOnDisk is the store's format major version before Open, 0 for a
// new store. Pebble keeps it in the "format-version" marker file
// (format_major_version.go, lookupFormatMajorVersion).
func formatOnDisk(fs vfs.FS, dir string) pebble.FormatMajorVersion {
	v, err := atomicfs.ReadMarker(fs, dir, "format-version")
	if err != nil {
		return 0
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0
	}
	return pebble.FormatMajorVersion(n)
}

type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...interface{}) {
	if p.l != nil {
		p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
	}
}

func (p pebbleLogger) Errorf(format string, args ...interface{}) {
	if p.l != nil {
		p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
	}
}

// Fatalf must not return (see fault.go). Inside Commit it panics with a
// value Commit recovers into a *CommitError; the store then stops the node
// and the node logs the failure once. Elsewhere (Pebble's own goroutines)
// it logs the failure and calls BackgroundFatal.
func (p pebbleLogger) Fatalf(format string, args ...interface{}) {
	msg := fmt.Sprintf(format, args...)
	if insideCommit() {
		var err error
		for _, a := range args {
			if e, ok := a.(error); ok {
				err = e
				break
			}
		}
		if p.l != nil {
			p.l.Debug(msg, "component", "pebble")
		}
		panic(fatalPanic{msg: msg, err: err})
	}
	if p.l != nil {
		p.l.Error("storage failure: "+msg+"; the node cannot continue and the process stops; restart it after the disk is fixed", "component", "pebble")
	}
	BackgroundFatal(msg)
	panic(msg) // BackgroundFatal must not return
}
