package storage

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// walFault fails WAL syncs and/or writes while switched on.
type walFault struct {
	sync, write bool
	writeErr    error
}

func (w *walFault) MaybeError(op errorfs.Op) error {
	if !strings.HasSuffix(op.Path, ".log") {
		return nil
	}
	switch op.Kind {
	case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
		if w.sync {
			return &fs.PathError{Op: "sync", Path: op.Path, Err: syscall.EIO}
		}
	case errorfs.OpFileWrite, errorfs.OpFileWriteAt:
		if w.write {
			return w.writeErr
		}
	}
	return nil
}

func (w *walFault) String() string { return "walFault" }

func setKey(t *testing.T, db *pebble.DB, k, v string) error {
	t.Helper()
	b := db.NewBatch()
	defer b.Close()
	if err := b.Set([]byte(k), []byte(v), nil); err != nil {
		t.Fatal(err)
	}
	return Commit(b, pebble.Sync)
}

func TestOpenPinsWALSyncChunks(t *testing.T) {
	db := openMem(t, vfs.NewMem())
	defer db.Close()
	if v := db.FormatMajorVersion(); v < pebble.FormatWALSyncChunks {
		t.Fatalf("format major version %v < FormatWALSyncChunks: WAL corruption would read as a torn tail", v)
	}
}

// TestCommitReportsFsyncFailure: a failed WAL fsync comes back from Commit
// as an error (Pebble calls Logger.Fatalf; our logger's panic is recovered),
// and the DB can still be closed.
func TestCommitReportsFsyncFailure(t *testing.T) {
	inj := &walFault{}
	db := openMem(t, errorfs.Wrap(vfs.NewCrashableMem(), inj))
	if err := setKey(t, db, "a", "1"); err != nil {
		t.Fatal(err)
	}
	inj.sync = true
	err := setKey(t, db, "b", "2")
	var ce *CommitError
	if !errors.As(err, &ce) {
		t.Fatalf("commit with failing fsync: got %v, want *CommitError", err)
	}
	if ce.Wedged || !errors.Is(err, syscall.EIO) || DescribeFailure(err) != "fsync failed" {
		t.Fatalf("commit error %q: wedged=%v, EIO=%v, described as %q", err, ce.Wedged, errors.Is(err, syscall.EIO), DescribeFailure(err))
	}
	t.Logf("commit error: %v", err)
	done := make(chan error, 1)
	go func() { done <- db.Close() }()
	select {
	case err := <-done:
		t.Logf("close after the failure: %v", err)
	case <-timeAfter(5):
		t.Fatal("DB.Close blocked after a failed fsync")
	}
}

// TestCommitReportsDiskFull: a WAL write failing with ENOSPC is reported
// the same way, as "disk full".
func TestCommitReportsDiskFull(t *testing.T) {
	inj := &walFault{writeErr: &fs.PathError{Op: "write", Path: "x.log", Err: syscall.ENOSPC}}
	db := openMem(t, errorfs.Wrap(vfs.NewCrashableMem(), inj))
	defer func() { _ = db.Close() }()
	if err := setKey(t, db, "a", "1"); err != nil {
		t.Fatal(err)
	}
	inj.write = true
	err := setKey(t, db, "b", "2")
	if !errors.Is(err, syscall.ENOSPC) || DescribeFailure(err) != "disk full" {
		t.Fatalf("commit on a full disk: %v (described as %q)", err, DescribeFailure(err))
	}
}

// TestPebbleFatalfMustNotReturn documents the Pebble behaviour fault.go
// relies on: DB.applyInternal reports a failed WAL sync only through
// Logger.Fatalf, and if Fatalf returns, Batch.Commit returns nil.
func TestPebbleFatalfMustNotReturn(t *testing.T) {
	inj := &walFault{}
	logger := &recordingLogger{}
	db, err := pebble.Open("/db", &pebble.Options{FS: errorfs.Wrap(vfs.NewCrashableMem(), inj), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	inj.sync = true
	if err := db.Set([]byte("k"), []byte("v"), pebble.Sync); err != nil {
		t.Fatalf("pebble now returns the sync error itself (%v): fault.go can be simplified", err)
	}
	if len(logger.fatal) == 0 {
		t.Fatal("a failed WAL sync was neither returned nor passed to Logger.Fatalf")
	}
	t.Logf("pebble: Commit returned nil after Fatalf(%q)", logger.fatal[0])
}

type recordingLogger struct{ fatal []string }

func (l *recordingLogger) Infof(string, ...interface{})  {}
func (l *recordingLogger) Errorf(string, ...interface{}) {}
func (l *recordingLogger) Fatalf(format string, args ...interface{}) {
	l.fatal = append(l.fatal, fmt.Sprintf(format, args...))
}

// walImage writes n synced batches (key%03d -> value of size vsize) to a
// fresh store and returns the filesystem as a crash right after the last
// sync leaves it, the newest WAL's path in it, and the WAL offset at which
// each batch's record starts.
func walImage(t *testing.T, n, vsize int, opts *pebble.Options) (*vfs.MemFS, string, []int64) {
	t.Helper()
	mem := vfs.NewCrashableMem()
	var db *pebble.DB
	var err error
	if opts == nil {
		db, err = Open("/db", Options{FS: mem})
	} else {
		opts.FS = mem
		if db, err = pebble.Open("/db", opts); err == nil {
			// The WAL of a new store predates the format ratchet (see
			// Open): rotate it so the format's WAL chunks are used.
			err = db.Flush()
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	path := newestWAL(t, mem, "/db")
	var starts []int64
	for i := 0; i < n; i++ {
		st, err := mem.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		starts = append(starts, st.Size())
		if err := setKey(t, db, fmt.Sprintf("key%03d", i), strings.Repeat(string(rune('a'+i%26)), vsize)); err != nil {
			t.Fatal(err)
		}
	}
	clone := mem.CrashClone(vfs.CrashCloneCfg{})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if p := newestWAL(t, clone, "/db"); p != path {
		t.Fatalf("newest WAL %s, expected %s", p, path)
	}
	return clone, path, starts
}

func newestWAL(t *testing.T, fs vfs.FS, dir string) string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var logs []string
	for _, n := range names {
		if strings.HasSuffix(n, ".log") {
			logs = append(logs, n)
		}
	}
	if len(logs) == 0 {
		t.Fatal("no WAL file")
	}
	sort.Strings(logs)
	return fs.PathJoin(dir, logs[len(logs)-1])
}

func readFile(t *testing.T, fs vfs.FS, path string) []byte {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, fs vfs.FS, path string, data []byte) {
	t.Helper()
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// keysPresent opens the store and returns which of key000..key<n-1> it holds.
func keysPresent(t *testing.T, db *pebble.DB, n int) []bool {
	t.Helper()
	out := make([]bool, n)
	for i := range out {
		_, closer, err := db.Get([]byte(fmt.Sprintf("key%03d", i)))
		if err == nil {
			closer.Close()
			out[i] = true
		} else if !errors.Is(err, pebble.ErrNotFound) {
			t.Fatal(err)
		}
	}
	return out
}

// TestOpenToleratesTornWALTail: the newest WAL cut inside its last record,
// or followed by zeroed or garbage bytes (what a crash during a write
// leaves), opens; only the torn record is lost and every record synced
// before it is intact.
func TestOpenToleratesTornWALTail(t *testing.T) {
	const n = 20
	cases := []struct {
		name   string
		mutate func(data []byte, starts []int64) []byte
		lost   int // index of the key lost, -1 if none
	}{
		{"intact", func(d []byte, _ []int64) []byte { return d }, -1},
		{"truncated inside the last record", func(d []byte, s []int64) []byte { return d[:s[n-1]+30] }, n - 1},
		{"truncated inside the last chunk header", func(d []byte, s []int64) []byte { return d[:s[n-1]+5] }, n - 1},
		{"zeroed bytes appended", func(d []byte, _ []int64) []byte { return append(d, make([]byte, 4096)...) }, -1},
		{"garbage appended", func(d []byte, _ []int64) []byte {
			g := make([]byte, 3000)
			rand.New(rand.NewSource(1)).Read(g)
			return append(d, g...)
		}, -1},
		{"last record zeroed", func(d []byte, s []int64) []byte {
			clear(d[s[n-1]:])
			return d
		}, n - 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs, path, starts := walImage(t, n, 100, nil)
			writeFile(t, fs, path, tc.mutate(readFile(t, fs, path), starts))
			db, err := Open("/db", Options{FS: fs})
			if err != nil {
				t.Fatalf("open after a torn tail: %v", err)
			}
			defer db.Close()
			for i, ok := range keysPresent(t, db, n) {
				if ok != (i != tc.lost) {
					t.Fatalf("key%03d present=%v (lost record: %d)", i, ok, tc.lost)
				}
			}
		})
	}
}

// TestOpenRefusesCorruptWAL: a flipped byte in an earlier, synced record of
// the newest WAL is corruption, not a torn tail: Open fails with an
// actionable error, in the same 32 KiB block as later records (which
// Pebble alone would drop silently) and across blocks (which Pebble
// detects itself).
func TestOpenRefusesCorruptWAL(t *testing.T) {
	for _, tc := range []struct {
		name     string
		n, vsize int
		flip     int // record whose payload gets a flipped byte
	}{
		{"same block", 20, 100, 5},
		{"earlier block", 200, 1000, 3},
		{"chunk header", 20, 100, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, path, starts := walImage(t, tc.n, tc.vsize, nil)
			data := readFile(t, fs, path)
			off := starts[tc.flip] + 40
			if tc.name == "chunk header" {
				off = starts[tc.flip] + 4 // length field
			}
			data[off] ^= 0x10
			writeFile(t, fs, path, data)
			db, err := Open("/db", Options{FS: fs})
			if err == nil {
				present := keysPresent(t, db, tc.n)
				db.Close()
				t.Fatalf("opened a store whose WAL is corrupt at offset %d; keys present: %v", off, present)
			}
			var ce *CorruptionError
			if !errors.As(err, &ce) || !errors.Is(err, pebble.ErrCorruption) {
				t.Fatalf("error %T %v: want *CorruptionError marked pebble.ErrCorruption", err, err)
			}
			msg := err.Error()
			for _, want := range []string{"write-ahead log in /db is corrupt at " + fs.PathBase(path), "refuses to start", "member remove", "--join"} {
				if !strings.Contains(msg, want) {
					t.Fatalf("error %q lacks %q", msg, want)
				}
			}
			t.Logf("%s", msg)
		})
	}
}

// TestPebbleWALCorruptionDetection documents what Pebble v2.1.7 does on its
// own: across blocks it detects the corruption only with sync chunks
// (FormatWALSyncChunks); within the last block it never does.
func TestPebbleWALCorruptionDetection(t *testing.T) {
	open := func(fs vfs.FS, v pebble.FormatMajorVersion) (*pebble.DB, error) {
		return pebble.Open("/db", &pebble.Options{FS: fs, FormatMajorVersion: v, Logger: &recordingLogger{}})
	}
	for _, tc := range []struct {
		name       string
		v          pebble.FormatMajorVersion
		n, vsize   int
		wantDetect bool
	}{
		{"oldest format, earlier block", pebble.FormatMinSupported, 200, 1000, false},
		{"sync chunks, earlier block", pebble.FormatWALSyncChunks, 200, 1000, true},
		{"sync chunks, same block", pebble.FormatWALSyncChunks, 20, 100, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, path, starts := walImage(t, tc.n, tc.vsize, &pebble.Options{FormatMajorVersion: tc.v, Logger: &recordingLogger{}})
			data := readFile(t, fs, path)
			data[starts[3]+40] ^= 0x10
			writeFile(t, fs, path, data)
			db, err := open(fs, tc.v)
			if tc.wantDetect {
				if !pebble.IsCorruptionError(err) {
					t.Fatalf("pebble open: %v, want ErrCorruption", err)
				}
				// What Open makes of Pebble's error.
				oe := openError(fs, "/db", err)
				var ce *CorruptionError
				if !errors.As(oe, &ce) || !errors.Is(oe, pebble.ErrCorruption) ||
					!strings.Contains(oe.Error(), "corrupt at "+fs.PathBase(path)) || !strings.Contains(oe.Error(), "refuses to start") {
					t.Fatalf("open error for pebble's %q: %v", err, oe)
				}
				return
			}
			if err != nil {
				t.Fatalf("pebble open: %v (now detects it: update the comments in wal.go)", err)
			}
			defer db.Close()
			present := keysPresent(t, db, tc.n)
			if present[2] != true || present[3] || present[tc.n-1] {
				t.Fatalf("expected records from the damaged one on to be dropped silently; present: %v", present)
			}
		})
	}
}

func timeAfter(sec int) <-chan time.Time { return time.After(time.Duration(sec) * time.Second) }

// TestFatalfOutsideCommit: a Fatalf from one of Pebble's own goroutines
// (not under Commit) goes to Options.BackgroundFatal, which must not return.
func TestFatalfOutsideCommit(t *testing.T) {
	var got string
	l := pebbleLogger{fatal: func(msg string) { got = msg; panic("exit") }}
	func() {
		defer func() {
			if r := recover(); r != "exit" {
				t.Fatalf("recovered %v", r)
			}
		}()
		l.Fatalf("MANIFEST sync failed: %v", syscall.EIO)
	}()
	if got != "MANIFEST sync failed: input/output error" {
		t.Fatalf("BackgroundFatal got %q", got)
	}
}

// TestDefaultBackgroundFatal: without Options.BackgroundFatal, a Fatalf
// outside Commit panics with the failure.
func TestDefaultBackgroundFatal(t *testing.T) {
	var o Options
	o.ensureDefaults()
	defer func() {
		if r := recover(); r != "storage failure: compaction failed" {
			t.Fatalf("recovered %v", r)
		}
	}()
	pebbleLogger{fatal: o.BackgroundFatal}.Fatalf("compaction failed")
}

// TestCommitAfterStickyWALErrorIsWedged: once the WAL's write error has
// reached LogWriter.err without any synced commit to report it (NoSync
// commits only), the next commit panics inside Pebble's commit pipeline
// with its commit mutex held (DB.commitWrite). Commit reports that as a
// wedged CommitError: the caller must not call DB.Close, which would block.
func TestCommitAfterStickyWALErrorIsWedged(t *testing.T) {
	inj := &walFault{writeErr: &fs.PathError{Op: "write", Path: "x.log", Err: syscall.EIO}}
	db := openMem(t, errorfs.Wrap(vfs.NewCrashableMem(), inj))
	// The DB is abandoned at the end (Close would block): that is the point.
	inj.write = true
	big := strings.Repeat("x", 40<<10) // fills a 32 KiB WAL block per commit
	var err error
	for i := 0; i < 200 && err == nil; i++ {
		b := db.NewBatch()
		if e := b.Set([]byte(fmt.Sprintf("k%d", i)), []byte(big), nil); e != nil {
			t.Fatal(e)
		}
		err = Commit(b, pebble.NoSync)
		if err == nil {
			_ = b.Close()
			time.Sleep(time.Millisecond) // let the flusher fail
		}
	}
	var ce *CommitError
	if !errors.As(err, &ce) || !ce.Wedged || !errors.Is(err, syscall.EIO) {
		t.Fatalf("NoSync commits after a WAL write error: %v (want a wedged CommitError wrapping EIO)", err)
	}
	t.Logf("%v", err)
	closed := make(chan struct{})
	go func() { _ = db.Close(); close(closed) }() // stays blocked: leaked on purpose
	select {
	case <-closed:
		t.Fatal("DB.Close returned after a panic in the commit pipeline: Pebble no longer wedges; simplify Node.closeAll")
	case <-time.After(300 * time.Millisecond):
	}
}

// TestOpenSeparatesLargeValues: a store written before value separation
// (FormatWALSyncChunks, as kvorum made them until then) opens with Open,
// is ratcheted to FormatValueSeparation with its data intact, and after a
// flush a large value lives in a blob file while a small one stays in the
// table. Compactions then move handles, not 1 KiB values.
func TestOpenSeparatesLargeValues(t *testing.T) {
	fs := vfs.NewMem()
	old, err := pebble.Open("/db", &pebble.Options{FS: fs, FormatMajorVersion: pebble.FormatWALSyncChunks, Logger: &recordingLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("v", 1024)
	if err := setKey(t, old, "old", big); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	db := openMem(t, fs)
	defer db.Close()
	if v := db.FormatMajorVersion(); v < pebble.FormatValueSeparation {
		t.Fatalf("format major version %v: an older store was not ratcheted to FormatValueSeparation", v)
	}
	if err := setKey(t, db, "big", big); err != nil {
		t.Fatal(err)
	}
	if err := setKey(t, db, "small", "s"); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	m := db.Metrics()
	if m.BlobFiles.LiveCount == 0 || m.BlobFiles.ValueSize < 1024 {
		t.Fatalf("after a flush: %d blob files holding %d value bytes; want the 1 KiB value separated", m.BlobFiles.LiveCount, m.BlobFiles.ValueSize)
	}
	if m.BlobFiles.ValueSize >= 2*1024 {
		t.Fatalf("blob files hold %d value bytes: more than the one large value flushed", m.BlobFiles.ValueSize)
	}
	for k, want := range map[string]string{"old": big, "big": big, "small": "s"} {
		v, closer, err := db.Get([]byte(k))
		if err != nil {
			t.Fatalf("get %s: %v", k, err)
		}
		if string(v) != want {
			t.Fatalf("get %s: %d bytes, want %d", k, len(v), len(want))
		}
		closer.Close()
	}
}
