package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"runtime"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
)

// What Pebble v2.1.7 does when writing or syncing its write-ahead log fails,
// and why every commit of the node goes through Commit below:
//
//   - record.LogWriter (record/log_writer.go, flushLoop/flushPending) writes
//     and fsyncs the WAL on its own goroutine. A failed Write or Sync is
//     handed to every commit waiting for that sync, and is then sticky: the
//     flusher never writes again and hands the same error to every later
//     sync waiter.
//   - The commit pipeline (commit.go, commitPipeline.Commit) has by then
//     applied the batch to the memtable and published it: the batch is
//     visible to readers of this DB although it is not durable. Commit
//     returns the sync error.
//   - DB.applyInternal (db.go) then calls Logger.Fatalf("pebble: fatal
//     commit error: %v", err) and, if Fatalf returns, Batch.Commit returns
//     nil: a failed fsync would be reported as success. So Fatalf must never
//     return.
//   - Once the sticky error has reached LogWriter.err (LogWriter.queueBlock),
//     the next LogWriter.SyncRecord returns it and DB.commitWrite (db.go)
//     panics with it while holding the commit pipeline's mutex: every later
//     commit, and DB.Close (which takes that mutex), then blocks forever.
//
// So pebbleLogger.Fatalf never returns: inside Commit it panics and Commit
// turns the panic (or one raised inside Pebble's commit) into a
// *CommitError; on Pebble's own goroutines it calls Options.BackgroundFatal.
// The store stops the node on any commit error: it never keeps running on a
// state it could not persist, and no waiter of the failed batch is told it
// succeeded. A node is restarted on what actually reached the disk.

// CommitError is a batch commit that Pebble could not make durable.
type CommitError struct {
	Err error
	// Wedged reports that Pebble panicked inside its commit pipeline with
	// its commit mutex held: DB.Close would block forever, so the DB must be
	// abandoned (the process is exiting or the node is being discarded).
	Wedged bool
}

func (e *CommitError) Error() string { return e.Err.Error() }
func (e *CommitError) Unwrap() error { return e.Err }

// fatalPanic is what pebbleLogger.Fatalf panics with inside Commit.
type fatalPanic struct {
	msg string
	err error // the first error among Fatalf's arguments, if any
}

// Commit commits b like b.Commit(opts), but reports Pebble's fatal commit
// errors (Logger.Fatalf, or a panic in the commit pipeline) as a
// *CommitError instead of crashing the process or, worse, returning nil.
// See the comment at the top of this file.
func Commit(b *pebble.Batch, opts *pebble.WriteOptions) (err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		switch v := r.(type) {
		case fatalPanic:
			// Fatalf after commitPipeline.Commit returned: no lock held.
			err = &CommitError{Err: &msgError{msg: v.msg, err: v.err}}
		case error:
			// DB.commitWrite panics with the WAL's sticky error while it
			// holds the commit mutex; DB.applyInternal panics (before any
			// lock) on a closed DB.
			err = &CommitError{Err: fmt.Errorf("pebble commit panicked: %w", v), Wedged: !errors.Is(v, pebble.ErrClosed)}
		default:
			err = &CommitError{Err: fmt.Errorf("pebble commit panicked: %v", v), Wedged: true}
		}
	}()
	return b.Commit(opts)
}

// SyncWAL makes every batch committed to db so far durable: one empty
// record written with Sync (Pebble's WAL is sequential, so its sync covers
// every record before it), with Commit's handling of Pebble's fatal errors.
func SyncWAL(db *pebble.DB) error {
	b := db.NewBatch()
	defer b.Close()
	if err := b.LogData(nil, nil); err != nil {
		return err
	}
	return Commit(b, pebble.Sync)
}

// msgError is Fatalf's message, unwrapping to the error it formatted.
type msgError struct {
	msg string
	err error
}

func (e *msgError) Error() string { return e.msg }
func (e *msgError) Unwrap() error { return e.err }

// commitFunc is Commit's name in stack traces.
var commitFunc = runtime.FuncForPC(reflect.ValueOf(Commit).Pointer()).Name()

// insideCommit reports whether the calling goroutine runs Commit, i.e.
// whether a panic raised here is recovered by Commit.
func insideCommit() bool {
	var pcs [64]uintptr
	n := runtime.Callers(3, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if f.Function == commitFunc {
			return true
		}
		if !more {
			return false
		}
	}
}

// DescribeFailure names what failed in err for an operator: "disk full",
// "fsync failed", "write failed", or a generic phrase.
func DescribeFailure(err error) string {
	var pe *fs.PathError
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return "disk full"
	case errors.Is(err, syscall.EDQUOT):
		return "disk quota exceeded"
	case errors.As(err, &pe) && strings.Contains(pe.Op, "sync"):
		return "fsync failed"
	case errors.As(err, &pe) && strings.Contains(pe.Op, "write"):
		return "write failed"
	default:
		return "could not persist the node's state"
	}
}
