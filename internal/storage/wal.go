package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/wal"
)

// The Raft log and all other state live in Pebble, so Pebble's write-ahead
// log is the node's log. What Pebble v2.1.7 does with a damaged WAL at Open
// (open.go, DB.replayWAL; record/record.go, Reader.nextChunk and
// Reader.readAheadForCorruption):
//
//   - Every WAL but the newest must end cleanly; any damage in one is
//     corruption and Open fails (an error marked pebble.ErrCorruption).
//   - In the newest WAL, a chunk that cannot be read (bad checksum, zeroed
//     header, bad length, file ending inside a record) is taken for the end
//     of the log, like a write torn by a crash, and everything after it is
//     dropped silently, UNLESS the reader finds proof that the damaged
//     bytes had been synced: a later valid chunk of the same log in the
//     "WAL sync" format whose synced-offset field lies beyond the damage.
//     Then it is corruption and Open fails.
//   - Sync chunks are only written from format major version
//     FormatWALSyncChunks on. Below it (the default for a new store is the
//     oldest supported format) there is never such proof: a flipped byte in
//     the middle of the newest WAL silently drops every synced record after
//     it. Open therefore pins the format (see Open).
//   - The read-ahead starts at the next 32 KiB block: damage followed by
//     sync chunks in the same block still reads as a torn tail.
//   - Open creates its new WAL before it ratchets the format version, so
//     the first WAL of a store created or upgraded by that Open has no sync
//     chunks; storage.Open rotates it away at once with a flush.
//
// checkWALTail closes that last gap before Pebble opens the store: it walks
// the newest WAL's chunks the way record.Reader does and, if reading stops
// early, scans the rest of the file (same block included) for that proof.
// A torn tail (no proof) is left to Pebble, which drops only the torn,
// never-acknowledged records.

// WAL chunk format (record/record.go): checksum uint32, length uint16,
// encoding byte, then for the recyclable encodings the log number uint32
// and for the sync encodings the synced offset uint64; the checksum covers
// the encoding byte onwards.
const (
	walBlockSize      = 32 << 10
	walLegacyHeader   = 7
	walRecycleHeader  = 11
	walSyncHeader     = 19
	walEncodingsCount = 13 // 0 invalid, 1-4 legacy, 5-8 recyclable, 9-12 sync
)

// walChecksum is Pebble's internal/crc: masked CRC-32C.
func walChecksum(b []byte) uint32 {
	c := crc32.Update(0, crcTable, b) // Castagnoli, shared with snapshot.go
	return (c>>15 | c<<17) + 0xa282ead8
}

// CorruptionError reports a store that must not be served from.
type CorruptionError struct {
	Dir    string
	File   string // the damaged WAL file, "" if not located
	Offset int64
	Detail string
	Err    error // Pebble's error, if it found the corruption
}

func (e *CorruptionError) Error() string {
	what := fmt.Sprintf("the data in %s is corrupt", e.Dir)
	if e.File != "" {
		what = fmt.Sprintf("the write-ahead log in %s is corrupt at %s offset %d", e.Dir, e.File, e.Offset)
	}
	detail := e.Detail
	if e.Err != nil {
		if detail != "" {
			detail += "; "
		}
		detail += e.Err.Error()
	}
	return fmt.Sprintf("storage: %s: %s; the node refuses to start rather than serve wrong data. "+
		"To rebuild it from its peers: move the data directory aside, remove the node from the cluster "+
		"(kvorum ctl --addr ADMIN member remove ID, on any member), then start it with an empty --data-dir "+
		"and --join PEER:PORT of a member; it rejoins and receives a full copy", what, detail)
}

// Unwrap returns Pebble's error, if Pebble found the corruption.
func (e *CorruptionError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, pebble.ErrCorruption) hold. (Pebble marks its
// own corruption errors with cockroachdb/errors, which the standard
// errors.Is does not see through: use pebble.IsCorruptionError for those.)
func (e *CorruptionError) Is(target error) bool { return target == pebble.ErrCorruption }

// walDamage is where reading a WAL stops before its end.
type walDamage struct {
	offset int64  // start of the first chunk that cannot be read
	reason string // why
	// synced is the synced offset claimed by a later valid sync chunk of
	// the same log, beyond offset: proof of corruption. 0 if none.
	synced    uint64
	proofAt   int64
	confirmed bool
}

// checkWALTail returns a *CorruptionError if the newest WAL in dir is
// damaged at a point that had been synced (see the comment above), and
// logs a torn tail that Pebble will drop.
func checkWALTail(fs vfs.FS, dir string, logger *slog.Logger) error {
	logs, err := wal.Scan(wal.Dir{FS: fs, Dirname: dir})
	if err != nil || len(logs) == 0 {
		return nil // Pebble reports unreadable directories itself
	}
	ll := logs[len(logs)-1]
	if ll.NumSegments() != 1 {
		return nil // WAL failover is not used by kvorum
	}
	_, path := ll.SegmentLocation(0)
	d, err := scanWALFile(fs, path, uint32(ll.Num))
	if err != nil || d == nil {
		return nil
	}
	if d.confirmed {
		return &CorruptionError{Dir: dir, File: fs.PathBase(path), Offset: d.offset,
			Detail: fmt.Sprintf("%s, yet a later record (offset %d) says the log had been synced up to offset %d", d.reason, d.proofAt, d.synced)}
	}
	// Pebble recycles WAL files: after the last record of this log comes
	// what an older log left there. That is a clean end, not a torn write.
	if logger != nil && !strings.HasPrefix(d.reason, "chunk of another log") {
		logger.Warn("write-ahead log ends with an incomplete record (a write torn by a crash); it is dropped and the node catches up from its peers",
			"file", fs.PathBase(path), "offset", d.offset, "reason", d.reason)
	}
	return nil
}

// locateWALDamage finds the first damaged WAL file in dir, for the message
// of a corruption Pebble reported.
func locateWALDamage(fs vfs.FS, dir string) (file string, d *walDamage) {
	logs, err := wal.Scan(wal.Dir{FS: fs, Dirname: dir})
	if err != nil {
		return "", nil
	}
	for _, ll := range logs {
		for i := 0; i < ll.NumSegments(); i++ {
			_, path := ll.SegmentLocation(i)
			if d, err := scanWALFile(fs, path, uint32(ll.Num)); err == nil && d != nil {
				return fs.PathBase(path), d
			}
		}
	}
	return "", nil
}

func scanWALFile(fs vfs.FS, path string, logNum uint32) (*walDamage, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	return scanWAL(data, logNum), nil
}

// scanWAL walks the chunks of one WAL file like record.Reader.nextChunk and
// returns nil if it reads to a clean end, else where and why it stops and
// whether a later chunk proves that point had been synced.
func scanWAL(data []byte, logNum uint32) *walDamage {
	wantFirst := true // between records
	for blk := 0; blk < len(data); blk += walBlockSize {
		buf := data[blk:min(blk+walBlockSize, len(data))]
		n := len(buf)
		end := 0
		for {
			if end+walLegacyHeader > n {
				if n < walBlockSize && (end != n || !wantFirst) {
					// Partial last block: the file ends inside a chunk
					// header or inside a record.
					return confirm(data, logNum, &walDamage{offset: int64(blk + end), reason: "the log ends inside a record"})
				}
				break // next block (a full block's last < 7 bytes are padding)
			}
			checksum := binary.LittleEndian.Uint32(buf[end:])
			length := int(binary.LittleEndian.Uint16(buf[end+4:]))
			enc := buf[end+6]
			bad := func(reason string) *walDamage {
				return confirm(data, logNum, &walDamage{offset: int64(blk + end), reason: reason})
			}
			if enc >= walEncodingsCount {
				return bad("invalid chunk encoding")
			}
			if enc == 0 {
				if checksum != 0 || length != 0 {
					return bad("invalid chunk header")
				}
				if end+walRecycleHeader > n {
					end = n // block padding
					continue
				}
				if end+walSyncHeader > n && allZero(buf[end:]) {
					end = n // block padding
					continue
				}
				return bad("zeroed chunk")
			}
			hdr := walLegacyHeader
			switch {
			case enc >= 9:
				hdr = walSyncHeader
			case enc >= 5:
				hdr = walRecycleHeader
			}
			if hdr > walLegacyHeader {
				if end+hdr > n {
					return bad("truncated chunk header")
				}
				if ln := binary.LittleEndian.Uint32(buf[end+7:]); ln != logNum {
					if ln == logNum+1 && wantFirst {
						return nil // EOF trailer written by a clean close
					}
					return bad(fmt.Sprintf("chunk of another log (%d)", ln))
				}
			}
			cEnd := end + hdr + length
			if cEnd > n {
				return bad("chunk runs past the end of its block or file")
			}
			if walChecksum(buf[end+6:cEnd]) != checksum {
				return bad("checksum mismatch")
			}
			pos := (enc-1)%4 + 1 // 1 full, 2 first, 3 middle, 4 last
			end = cEnd
			if wantFirst && pos != 1 && pos != 2 {
				continue // record.Reader skips stray continuation chunks
			}
			wantFirst = pos == 1 || pos == 4
		}
	}
	if !wantFirst {
		return confirm(data, logNum, &walDamage{offset: int64(len(data)), reason: "the log ends inside a record"})
	}
	return nil
}

// confirm scans data after d.offset for a valid sync chunk of logNum whose
// synced offset lies beyond d.offset: the damaged bytes had been synced, so
// the damage is corruption, not a torn write.
func confirm(data []byte, logNum uint32, d *walDamage) *walDamage {
	for p := int(d.offset) + 1; p+walSyncHeader <= len(data); p++ {
		enc := data[p+6]
		if enc < 9 || enc >= walEncodingsCount || binary.LittleEndian.Uint32(data[p+7:]) != logNum {
			continue
		}
		blockEnd := (p/walBlockSize + 1) * walBlockSize
		cEnd := p + walSyncHeader + int(binary.LittleEndian.Uint16(data[p+4:]))
		if cEnd > blockEnd || cEnd > len(data) {
			continue
		}
		synced := binary.LittleEndian.Uint64(data[p+11:])
		if synced <= uint64(d.offset) || walChecksum(data[p+6:cEnd]) != binary.LittleEndian.Uint32(data[p:]) {
			continue
		}
		d.confirmed, d.synced, d.proofAt = true, synced, int64(p)
		return d
	}
	return d
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// openError turns Pebble's Open error into an actionable one.
func openError(fs vfs.FS, dir string, err error) error {
	if !pebble.IsCorruptionError(err) {
		return fmt.Errorf("storage: open %s: %w", dir, err)
	}
	ce := &CorruptionError{Dir: dir, Err: err}
	if file, d := locateWALDamage(fs, dir); d != nil {
		ce.File, ce.Offset, ce.Detail = file, d.offset, d.reason
	}
	return ce
}
