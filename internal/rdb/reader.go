package rdb

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// RDB file opcodes.
const (
	opSlotInfo     = 244
	opFunction2    = 245
	opFunctionPre  = 246
	opModuleAux    = 247
	opIdle         = 248
	opFreq         = 249
	opAux          = 250
	opResizeDB     = 251
	opExpireTimeMs = 252
	opExpireTime   = 253
	opSelectDB     = 254
	opEOF          = 255
)

// streamSource reads a file through a buffer, counting the bytes and
// computing their CRC64 as it goes.
type streamSource struct {
	br  *bufio.Reader
	n   int64
	crc uint64
	one [1]byte
}

func (s *streamSource) ReadByte() (byte, error) {
	b, err := s.br.ReadByte()
	if err != nil {
		if err == io.EOF {
			return 0, errTruncated
		}
		return 0, err
	}
	s.n++
	s.one[0] = b
	s.crc = crc64Update(s.crc, s.one[:])
	return b, nil
}

func (s *streamSource) readN(n uint64) ([]byte, error) {
	const chunk = 1 << 16
	out := make([]byte, 0, min(n, chunk))
	for uint64(len(out)) < n {
		k := min(n-uint64(len(out)), chunk)
		start := len(out)
		out = append(out, make([]byte, k)...)
		m, err := io.ReadFull(s.br, out[start:])
		s.n += int64(m)
		s.crc = crc64Update(s.crc, out[start:start+m])
		if err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return nil, errTruncated
			}
			return nil, err
		}
	}
	return out, nil
}

func (s *streamSource) remaining() int64 { return -1 }

// Reader reads the keys of an RDB file.
type Reader struct {
	src       *streamSource
	d         *decoder
	version   int
	db        int
	functions int
	done      bool
	err       error
}

// NewReader reads the header of an RDB file: "REDIS" and a version in
// 1..12; an error names what is wrong.
func NewReader(r io.Reader) (*Reader, error) {
	src := &streamSource{br: bufio.NewReaderSize(r, 1<<16)}
	hdr, err := src.readN(9)
	if err != nil {
		return nil, fmt.Errorf("rdb: reading the header: %w", err)
	}
	if string(hdr[:5]) != "REDIS" {
		return nil, fmt.Errorf("rdb: not an RDB file (no REDIS magic)")
	}
	for _, c := range hdr[5:] {
		if c < '0' || c > '9' {
			return nil, fmt.Errorf("rdb: invalid RDB version %q", hdr[5:])
		}
	}
	v, _ := strconv.Atoi(string(hdr[5:]))
	if v < 1 || v > 12 {
		return nil, fmt.Errorf("rdb: unsupported RDB version %d", v)
	}
	return &Reader{src: src, d: &decoder{src: src}, version: v}, nil
}

// fileErr describes err, which happened while reading the file.
func (r *Reader) fileErr(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("rdb: file truncated at offset %d: %w", r.src.n, err)
	}
	return fmt.Errorf("rdb: at offset %d: %w", r.src.n, err)
}

// Next returns the next key, or io.EOF after the end marker once the
// file's checksum (when it has one) was verified. Auxiliary fields,
// database selectors and resize hints are consumed on the way; functions
// (Redis 7's RDB_OPCODE_FUNCTION2) are skipped and counted; a module type
// is an error naming it.
func (r *Reader) Next() (*Entry, error) {
	if r.err != nil {
		return nil, r.err
	}
	if r.done {
		return nil, io.EOF
	}
	e, err := r.next()
	if err != nil {
		if err != io.EOF {
			err = r.fileErr(err)
		}
		r.err = err
		return nil, err
	}
	return e, nil
}

func (r *Reader) next() (*Entry, error) {
	d := r.d
	e := &Entry{DB: r.db, Idle: -1, Freq: -1}
	for {
		op, err := d.byte()
		if err != nil {
			return nil, err
		}
		switch op {
		case opEOF:
			r.done = true
			if r.version >= 5 {
				want := r.src.crc
				b, err := r.src.readN(8)
				if err != nil {
					return nil, err
				}
				if got := binary.LittleEndian.Uint64(b); got != 0 && got != want {
					return nil, fmt.Errorf("checksum mismatch: file says %016x, computed %016x", got, want)
				}
			}
			return nil, io.EOF
		case opSelectDB:
			db, err := d.plainLen()
			if err != nil {
				return nil, err
			}
			if db > 1<<31 {
				return nil, formatErr("database %d", db)
			}
			r.db = int(db)
			e.DB = r.db
		case opResizeDB:
			if _, err := d.plainLen(); err != nil {
				return nil, err
			}
			if _, err := d.plainLen(); err != nil {
				return nil, err
			}
		case opSlotInfo:
			for i := 0; i < 3; i++ {
				if _, err := d.plainLen(); err != nil {
					return nil, err
				}
			}
		case opAux:
			if _, err := d.string(); err != nil {
				return nil, err
			}
			if _, err := d.string(); err != nil {
				return nil, err
			}
		case opExpireTimeMs:
			b, err := r.src.readN(8)
			if err != nil {
				return nil, err
			}
			e.ExpireMs = int64(binary.LittleEndian.Uint64(b))
		case opExpireTime:
			b, err := r.src.readN(4)
			if err != nil {
				return nil, err
			}
			e.ExpireMs = int64(int32(binary.LittleEndian.Uint32(b))) * 1000
		case opIdle:
			idle, err := d.plainLen()
			if err != nil {
				return nil, err
			}
			e.Idle = int64(idle & (1<<63 - 1))
		case opFreq:
			b, err := d.byte()
			if err != nil {
				return nil, err
			}
			e.Freq = int(b)
		case opFunction2:
			if _, err := d.string(); err != nil {
				return nil, err
			}
			r.functions++
		case opFunctionPre:
			return nil, formatErr("pre-GA function data (opcode 246) not supported")
		case opModuleAux:
			return nil, formatErr("module auxiliary data (opcode 247) not supported")
		default:
			key, err := d.string()
			if err != nil {
				return nil, err
			}
			v, err := d.object(op)
			if err != nil {
				return nil, err
			}
			e.Key = key
			e.Value = v
			return e, nil
		}
	}
}

// Version returns the file's RDB version.
func (r *Reader) Version() int { return r.version }

// Offset returns how many bytes of the file were read so far (for
// progress output).
func (r *Reader) Offset() int64 { return r.src.n }

// SkippedFunctions returns how many function libraries were skipped.
func (r *Reader) SkippedFunctions() int { return r.functions }
