package storage

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// A snapshot of a range is its applied state: the range descriptor and every
// user key/value the range owns, read from a Pebble snapshot pinned at the
// moment raft asked for it. Nothing is materialised on disk on the sending
// side; the receiver stages the stream in a file and applies it when raft
// hands the snapshot back in a Ready.
//
// Stream format (all integers uvarint):
//
//	"KVSNAP1\n" or "KVSNAP2\n"
//	len, descriptor JSON
//	index, term
//	repeated: klen (>0), key, vlen, value
//	0                      end of pairs
//	crc32c (4 bytes BE) of everything before it
//
// The magic says the layout of the user keys: KVSNAP1, store format 1
// (0x10 <escaped key> …), KVSNAP2, the store's own layout (format 2, with
// the hash slot). Writers send KVSNAP1, converting keys with LegacyKeys, so
// that nodes of the release before format 2 read the stream; readers take
// both and convert KVSNAP1 keys back (docs/architecture.md, "Rolling
// upgrades"). The pairs of a converted stream are not in key order: no
// reader needs them to be (receivers stage them into a batch).

const (
	snapMagic   = "KVSNAP1\n"
	snapMagicV2 = "KVSNAP2\n"
)

// LegacyKeys converts the keys of the user data between a KVSNAP1 stream
// (store format 1) and the store's layout. Package kv sets it at init
// (kv.V1Key, kv.V2Key); while unset (programs without kv, such as the
// store package's tests), keys travel as they are.
type LegacyKeys struct {
	// ToV1 appends the format 1 form of key k to dst.
	ToV1 func(dst, k []byte) []byte
	// FromV1 appends the store's form of format 1 key k of range id's
	// stream to dst (hidden keys that became range-local go to id's
	// replicated range-local span); nil and no error drops the pair (a key
	// the store no longer keeps); an error (wrapping ErrCorrupt) rejects
	// the stream.
	FromV1 func(dst, k []byte, id RangeID) ([]byte, error)
}

var legacyKeys LegacyKeys

// SetLegacyKeys sets the conversion of KVSNAP1 keys; call it before any
// stream is written or read (package init).
func SetLegacyKeys(l LegacyKeys) { legacyKeys = l }

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// SpanFunc returns the storage span holding a range's user data.
type SpanFunc func(d *Descriptor) (start, end []byte)

// SnapshotRegistry tracks the Pebble snapshots raft has asked for until the
// transport streams them (or they expire).
type SnapshotRegistry struct {
	span SpanFunc
	ttl  time.Duration

	mu struct {
		sync.Mutex
		next  uint64
		snaps map[uint64]*pinned
	}
}

type pinned struct {
	snap    *pebble.Snapshot
	rangeID RangeID
	meta    *raftpb.SnapshotMetadata
	created time.Time
}

// NewSnapshotRegistry returns a registry; span says which keys a range's
// snapshot carries.
func NewSnapshotRegistry(span SpanFunc) *SnapshotRegistry {
	r := &SnapshotRegistry{span: span, ttl: 5 * time.Minute}
	r.mu.snaps = map[uint64]*pinned{}
	return r
}

func (r *SnapshotRegistry) create(db *pebble.DB, id RangeID) (*raftpb.Snapshot, error) {
	ps := db.NewSnapshot()
	applied, err := LoadAppliedState(ps, id)
	if err != nil {
		_ = ps.Close()
		return nil, err
	}
	meta := &raftpb.SnapshotMetadata{Index: proto.Uint64(applied.Index), Term: proto.Uint64(applied.Term), ConfState: applied.ConfState}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	for k, p := range r.mu.snaps {
		if now.Sub(p.created) > r.ttl {
			_ = p.snap.Close()
			delete(r.mu.snaps, k)
		}
	}
	r.mu.next++
	sid := r.mu.next
	r.mu.snaps[sid] = &pinned{snap: ps, rangeID: id, meta: meta, created: now}
	data := binary.BigEndian.AppendUint64(nil, uint64(id))
	data = binary.BigEndian.AppendUint64(data, sid)
	return &raftpb.Snapshot{Data: data, Metadata: meta}, nil
}

// SnapshotRangeID returns the range a snapshot message's data refers to.
func SnapshotRangeID(data []byte) (RangeID, error) {
	if len(data) != 16 {
		return 0, fmt.Errorf("%w: snapshot reference", ErrCorrupt)
	}
	return RangeID(binary.BigEndian.Uint64(data)), nil
}

// Open returns the stream for a snapshot created by raft.Storage.Snapshot.
// Each snapshot can be opened once; the caller must Close the reader.
func (r *SnapshotRegistry) Open(s *raftpb.Snapshot) (io.ReadCloser, error) {
	data := s.GetData()
	if len(data) != 16 {
		return nil, ErrNoSnapshot
	}
	sid := binary.BigEndian.Uint64(data[8:])
	r.mu.Lock()
	p, ok := r.mu.snaps[sid]
	delete(r.mu.snaps, sid)
	r.mu.Unlock()
	if !ok {
		return nil, ErrNoSnapshot
	}
	pr, pw := io.Pipe()
	go func() {
		defer p.snap.Close()
		pw.CloseWithError(r.write(pw, p))
	}()
	return pr, nil
}

// Close releases every pinned snapshot.
func (r *SnapshotRegistry) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, p := range r.mu.snaps {
		_ = p.snap.Close()
		delete(r.mu.snaps, k)
	}
}

func (r *SnapshotRegistry) write(w io.Writer, p *pinned) error {
	desc, ok, err := LoadDescriptor(p.snap, p.rangeID)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("storage: range %d has no descriptor", p.rangeID)
	}
	return WriteSnapshotStream(w, desc, p.meta, func(emit func(k, v []byte) error) error {
		return EmitRange(p.snap, desc, r.span, emit)
	})
}

// rangeOf is d's range id; 1 (the range of every single-range store) when
// d names none.
func rangeOf(d *Descriptor) RangeID {
	if d == nil || d.RangeID == 0 {
		return 1
	}
	return d.RangeID
}

// EmitRange calls emit for every key/value of range d's replicated state
// in r, in order: its replicated range-local keys (ReplicatedRangeSpan),
// then its user data (span(d)). Snapshots and backups carry exactly this.
func EmitRange(r pebble.Reader, d *Descriptor, span SpanFunc, emit func(k, v []byte) error) error {
	rs, re := ReplicatedRangeSpan(rangeOf(d))
	if err := EmitSpan(r, rs, re, emit); err != nil {
		return err
	}
	start, end := span(d)
	return EmitSpan(r, start, end, emit)
}

// EmitSpan calls emit for every key/value of r in [start, end), in order.
func EmitSpan(r pebble.Reader, start, end []byte, emit func(k, v []byte) error) error {
	iter, err := r.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return err
	}
	defer iter.Close()
	for valid := iter.First(); valid; valid = iter.Next() {
		v, err := iter.ValueAndErr()
		if err != nil {
			return err
		}
		if err := emit(iter.Key(), v); err != nil {
			return err
		}
	}
	return iter.Error()
}

// WriteSnapshotStream writes a snapshot stream; pairs calls emit for each
// key/value in order. It writes KVSNAP1: keys in format 1 (LegacyKeys.ToV1).
func WriteSnapshotStream(w io.Writer, desc *Descriptor, meta *raftpb.SnapshotMetadata, pairs func(emit func(k, v []byte) error) error) error {
	return writeSnapshotStream(w, snapMagic, desc, meta, pairs)
}

func writeSnapshotStream(w io.Writer, magic string, desc *Descriptor, meta *raftpb.SnapshotMetadata, pairs func(emit func(k, v []byte) error) error) error {
	toV1 := legacyKeys.ToV1
	if magic != snapMagic {
		toV1 = nil
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	crc := crc32.New(crcTable)
	mw := io.MultiWriter(bw, crc)
	var hdr []byte
	dj, err := json.Marshal(desc)
	if err != nil {
		return err
	}
	hdr = append(hdr, magic...)
	hdr = binary.AppendUvarint(hdr, uint64(len(dj)))
	hdr = append(hdr, dj...)
	hdr = binary.AppendUvarint(hdr, meta.GetIndex())
	hdr = binary.AppendUvarint(hdr, meta.GetTerm())
	if _, err := mw.Write(hdr); err != nil {
		return err
	}
	var buf, kbuf []byte
	err = pairs(func(k, v []byte) error {
		if len(k) == 0 {
			return errors.New("storage: empty key in snapshot")
		}
		if toV1 != nil {
			kbuf = toV1(kbuf[:0], k)
			k = kbuf
		}
		buf = binary.AppendUvarint(buf[:0], uint64(len(k)))
		buf = append(buf, k...)
		buf = binary.AppendUvarint(buf, uint64(len(v)))
		if _, err := mw.Write(buf); err != nil {
			return err
		}
		_, err := mw.Write(v)
		return err
	})
	if err != nil {
		return err
	}
	if _, err := mw.Write([]byte{0}); err != nil {
		return err
	}
	if _, err := bw.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32())); err != nil {
		return err
	}
	return bw.Flush()
}

// snapshotBuffer is the read buffer of ReadSnapshotStream: given a
// *bufio.Reader at least this large, it reads through it without a buffer
// of its own (ReadBackup relies on it).
const snapshotBuffer = 256 << 10

// maxSnapshotField bounds one key, value or header in a snapshot stream.
const maxSnapshotField = 1 << 30

// ReadSnapshotStream reads a stream written by WriteSnapshotStream, calling
// fn for each pair (the slices are only valid during the call) with its key
// in the store's layout (a KVSNAP1 key converted by LegacyKeys.FromV1;
// pairs then come in no particular order). It verifies
// the checksum at the end; fn may have been called for pairs of a stream
// that later fails verification, so callers stage data before applying it.
func ReadSnapshotStream(r io.Reader, fn func(k, v []byte) error) (*Descriptor, *raftpb.SnapshotMetadata, error) {
	crc := crc32.New(crcTable)
	br := bufio.NewReaderSize(r, snapshotBuffer)
	tr := &teeByteReader{r: br, h: crc}
	magic := make([]byte, len(snapMagic))
	if _, err := io.ReadFull(tr, magic); err != nil {
		return nil, nil, fmt.Errorf("snapshot stream: %w", err)
	}
	var fromV1 func(dst, k []byte, id RangeID) ([]byte, error)
	switch string(magic) {
	case snapMagic:
		fromV1 = legacyKeys.FromV1
	case snapMagicV2:
	default:
		return nil, nil, fmt.Errorf("%w: snapshot stream header %q", ErrCorrupt, magic)
	}
	readField := func(buf []byte) ([]byte, error) {
		n, err := binary.ReadUvarint(tr)
		if err != nil {
			return nil, err
		}
		if n > maxSnapshotField {
			return nil, fmt.Errorf("%w: snapshot field of %d bytes", ErrCorrupt, n)
		}
		if uint64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		_, err = io.ReadFull(tr, buf)
		return buf, err
	}
	dj, err := readField(nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: snapshot descriptor: %w", ErrCorrupt, err)
	}
	desc := &Descriptor{}
	if err := json.Unmarshal(dj, desc); err != nil {
		return nil, nil, fmt.Errorf("%w: snapshot descriptor: %w", ErrCorrupt, err)
	}
	meta := &raftpb.SnapshotMetadata{}
	idx, err := binary.ReadUvarint(tr)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: snapshot index: %w", ErrCorrupt, err)
	}
	term, err := binary.ReadUvarint(tr)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: snapshot term: %w", ErrCorrupt, err)
	}
	meta.Index, meta.Term = proto.Uint64(idx), proto.Uint64(term)
	var kbuf, vbuf, cbuf []byte
	for {
		kl, err := binary.ReadUvarint(tr)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: snapshot stream: %w", ErrCorrupt, err)
		}
		if kl == 0 {
			break
		}
		if kl > maxSnapshotField {
			return nil, nil, fmt.Errorf("%w: snapshot key of %d bytes", ErrCorrupt, kl)
		}
		if uint64(cap(kbuf)) < kl {
			kbuf = make([]byte, kl)
		}
		kbuf = kbuf[:kl]
		if _, err := io.ReadFull(tr, kbuf); err != nil {
			return nil, nil, fmt.Errorf("%w: snapshot stream: %w", ErrCorrupt, err)
		}
		if vbuf, err = readField(vbuf); err != nil {
			return nil, nil, fmt.Errorf("%w: snapshot stream: %w", ErrCorrupt, err)
		}
		k := kbuf
		if fromV1 != nil {
			if cbuf, err = fromV1(cbuf[:0], kbuf, rangeOf(desc)); err != nil {
				return nil, nil, err
			}
			if cbuf == nil {
				continue
			}
			k = cbuf
		}
		if err := fn(k, vbuf); err != nil {
			return nil, nil, err
		}
	}
	want := crc.Sum32()
	var sum [4]byte
	if _, err := io.ReadFull(br, sum[:]); err != nil {
		return nil, nil, fmt.Errorf("%w: snapshot checksum: %w", ErrCorrupt, err)
	}
	if binary.BigEndian.Uint32(sum[:]) != want {
		return nil, nil, fmt.Errorf("%w: snapshot checksum mismatch", ErrCorrupt)
	}
	return desc, meta, nil
}

type teeByteReader struct {
	r *bufio.Reader
	h interface{ Write([]byte) (int, error) }
}

func (t *teeByteReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	_, _ = t.h.Write(p[:n])
	return n, err
}

func (t *teeByteReader) ReadByte() (byte, error) {
	b, err := t.r.ReadByte()
	if err == nil {
		_, _ = t.h.Write([]byte{b})
	}
	return b, err
}
