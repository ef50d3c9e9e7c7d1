package store

import (
	"bytes"
	"errors"
	"io"
	"syscall"
	"testing"

	"github.com/kvorum/kvorum/internal/storage"
)

type failingWriter struct{}

func (failingWriter) Write(p []byte) (int, error) { return 0, syscall.ENOSPC }

// TestCopyingTeeKeepsWriteError: a snapshot stream small enough to be read
// in one Read parses without error through ReadSnapshotStream's buffer
// even though the tee could not write it to the staged file; the tee keeps
// the error for ReceiveSnapshot to check (TestDiskFullStopsFollower in CI:
// a follower whose disk failed staged an empty snapshot file and stopped
// with "snapshot stream: EOF" instead of "disk full").
func TestCopyingTeeKeepsWriteError(t *testing.T) {
	var stream bytes.Buffer
	if err := storage.WriteSnapshotStream(&stream, (&storage.Descriptor{RangeID: 1}).FullSlots(), nil, func(emit func(k, v []byte) error) error {
		return emit([]byte("k"), []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	tee := &copyingTee{r: bytes.NewReader(stream.Bytes()), w: failingWriter{}}
	_, _, err := storage.ReadSnapshotStream(tee, func(k, v []byte) error { return nil })
	if err == nil && tee.werr == nil {
		t.Fatal("the write error was lost")
	}
	if !errors.Is(tee.werr, syscall.ENOSPC) {
		t.Fatalf("tee.werr = %v, want ENOSPC", tee.werr)
	}
	if n, rerr := tee.Read(make([]byte, 8)); n != 0 || rerr == nil || rerr == io.EOF {
		t.Fatalf("a read after the failed write: %d %v", n, rerr)
	}
}
