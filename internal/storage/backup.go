package storage

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"

	"go.etcd.io/raft/v3/raftpb"
)

// A backup is one range's applied state at one log index, as a file:
//
//	"KVBACKUP1\n"
//	len (uvarint), header JSON (BackupHeader)
//	the range's snapshot stream (see WriteSnapshotStream: descriptor,
//	index, term, every pair, crc32c)
//	SHA-256 (32 bytes) of everything before it
//
// The snapshot stream's checksum catches a damaged transfer; the SHA-256
// covers the header as well and is the backup's identity (BackupInfo.Sum):
// a cluster restored from it derives its cluster id from it, so nodes
// seeded from different backups never mistake each other for members of
// one cluster.

const backupMagic = "KVBACKUP1\n"

// maxBackupHeader bounds the header's length.
const maxBackupHeader = 1 << 20

// ErrNotBackup is the error of a file that does not start like a backup.
var ErrNotBackup = errors.New("not a kvorum backup")

// BackupHeader describes a backup.
type BackupHeader struct {
	Format    int    `json:"format"` // 1
	ClusterID uint64 `json:"cluster_id"`
	NodeID    uint64 `json:"node_id"` // the node that streamed it
	RangeID   uint64 `json:"range_id"`
	Index     uint64 `json:"index"` // the applied index the data is at
	Term      uint64 `json:"term"`
	Created   string `json:"created"` // RFC 3339, UTC
	Version   string `json:"version"` // kvorum's
}

// BackupInfo is what reading a backup learned.
type BackupInfo struct {
	Header BackupHeader
	Desc   *Descriptor
	Pairs  int64
	Bytes  int64    // the whole file's size
	Sum    [32]byte // SHA-256 of the file but its last 32 bytes
}

// WriteBackup writes a backup: hdr, then the snapshot stream of desc at
// hdr.Index/hdr.Term with the pairs pairs emits (in key order).
func WriteBackup(w io.Writer, hdr BackupHeader, desc *Descriptor, pairs func(emit func(k, v []byte) error) error) error {
	hdr.Format = 1
	hj, err := json.Marshal(hdr)
	if err != nil {
		return err
	}
	sum := sha256.New()
	mw := io.MultiWriter(w, sum)
	head := append([]byte(backupMagic), binary.AppendUvarint(nil, uint64(len(hj)))...)
	if _, err := mw.Write(append(head, hj...)); err != nil {
		return err
	}
	meta := &raftpb.SnapshotMetadata{Index: &hdr.Index, Term: &hdr.Term}
	if err := WriteSnapshotStream(mw, desc, meta, pairs); err != nil {
		return err
	}
	_, err = w.Write(sum.Sum(nil))
	return err
}

// ReadBackup reads and verifies a backup, calling fn (if not nil) for each
// pair; the slices are only valid during the call. As with snapshots, fn
// may be called for pairs of a file that later fails verification: stage
// what it is given. Errors say what is wrong: not a backup, truncated (at
// which byte), or altered.
func ReadBackup(r io.Reader, fn func(k, v []byte) error) (BackupInfo, error) {
	var info BackupInfo
	th := &trailerHasher{r: r, h: sha256.New()}
	// ReadSnapshotStream reads through this very reader (bufio returns a
	// reader of at least the size asked for as is), so after it returns
	// br is just past the stream.
	br := bufio.NewReaderSize(th, snapshotBuffer)
	at := func() int64 { return th.n - int64(br.Buffered()) }
	magic := make([]byte, len(backupMagic))
	if _, err := io.ReadFull(br, magic); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return info, fmt.Errorf("%w: the file has only %d bytes", ErrNotBackup, th.n)
		}
		return info, err
	}
	if string(magic) != backupMagic {
		return info, fmt.Errorf("%w: it starts with %q, not %q", ErrNotBackup, magic, backupMagic)
	}
	n, err := binary.ReadUvarint(br)
	if err != nil || n > maxBackupHeader {
		return info, truncatedOr(err, at(), "the header's length")
	}
	hj := make([]byte, n)
	if _, err := io.ReadFull(br, hj); err != nil {
		return info, truncatedOr(err, at(), "the header")
	}
	if err := json.Unmarshal(hj, &info.Header); err != nil {
		return info, fmt.Errorf("backup header is damaged: %v", err)
	}
	if info.Header.Format != 1 {
		return info, fmt.Errorf("backup format %d is not supported (this kvorum reads format 1)", info.Header.Format)
	}
	desc, meta, err := ReadSnapshotStream(br, func(k, v []byte) error {
		info.Pairs++
		if fn == nil {
			return nil
		}
		return fn(k, v)
	})
	if err != nil {
		return info, truncatedOr(err, at(), "the data")
	}
	if meta.GetIndex() != info.Header.Index || meta.GetTerm() != info.Header.Term {
		return info, fmt.Errorf("backup is damaged: its header says index %d term %d, its data index %d term %d",
			info.Header.Index, info.Header.Term, meta.GetIndex(), meta.GetTerm())
	}
	rest, err := io.ReadAll(io.LimitReader(br, sha256.Size+1))
	switch {
	case err != nil:
		return info, err
	case len(rest) < sha256.Size:
		return info, fmt.Errorf("backup is truncated: the file ends at byte %d, in the checksum", th.n)
	case len(rest) > sha256.Size:
		return info, errors.New("backup has bytes after its checksum: the file was altered or two files were joined")
	}
	copy(info.Sum[:], th.h.Sum(nil))
	if !bytes.Equal(rest, info.Sum[:]) || !bytes.Equal(rest, th.tail) {
		return info, errors.New("backup checksum mismatch: the file was altered")
	}
	info.Desc, info.Bytes = desc, th.n
	return info, nil
}

// truncatedOr reports err while reading what (the file had at least off
// bytes) as a truncation if it is one.
func truncatedOr(err error, off int64, what string) error {
	if err == nil {
		return fmt.Errorf("backup is damaged: %s is too long", what)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("backup is truncated: the file ends at byte %d, in %s", off, what)
	}
	if errors.Is(err, ErrCorrupt) {
		return fmt.Errorf("backup is damaged in %s: %w", what, err)
	}
	return err
}

// trailerHasher reads r and hashes all it reads but the last sha256.Size
// bytes so far, which it keeps in tail: at the end of the file, h is the
// digest of everything before the trailer and tail is the trailer.
type trailerHasher struct {
	r    io.Reader
	h    hash.Hash
	n    int64
	tail []byte
}

func (t *trailerHasher) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.n += int64(n)
	t.tail = append(t.tail, p[:n]...)
	if over := len(t.tail) - sha256.Size; over > 0 {
		t.h.Write(t.tail[:over])
		t.tail = append(t.tail[:0], t.tail[over:]...)
	}
	return n, err
}
