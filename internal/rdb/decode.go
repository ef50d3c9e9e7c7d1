package rdb

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
)

// errTruncated is the error of input that ends in the middle of an
// object.
var errTruncated = fmt.Errorf("truncated input: %w", io.ErrUnexpectedEOF)

// formatErr wraps ErrFormat with a description.
func formatErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrFormat}, args...)...)
}

// source is what the decoder reads: a byte slice (a DUMP payload) or a
// stream (an RDB file).
type source interface {
	ReadByte() (byte, error)
	// readN returns the next n bytes, errTruncated if there are fewer. It
	// never allocates much more than what it actually read.
	readN(n uint64) ([]byte, error)
	// remaining is how many bytes are left, -1 if unknown.
	remaining() int64
}

type sliceSource struct {
	b   []byte
	pos int
}

func (s *sliceSource) ReadByte() (byte, error) {
	if s.pos >= len(s.b) {
		return 0, errTruncated
	}
	s.pos++
	return s.b[s.pos-1], nil
}

func (s *sliceSource) readN(n uint64) ([]byte, error) {
	if n > uint64(len(s.b)-s.pos) {
		return nil, errTruncated
	}
	b := s.b[s.pos : s.pos+int(n)]
	s.pos += int(n)
	return b, nil
}

func (s *sliceSource) remaining() int64 { return int64(len(s.b) - s.pos) }

// decoder reads RDB encodings.
type decoder struct {
	src source
}

func (d *decoder) byte() (byte, error) {
	b, err := d.src.ReadByte()
	if err == io.EOF {
		err = errTruncated
	}
	return b, err
}

// length reads a length; encoded reports a special encoding (the low 6
// bits then are the encoding).
func (d *decoder) length() (l uint64, encoded bool, err error) {
	b, err := d.byte()
	if err != nil {
		return 0, false, err
	}
	switch b >> 6 {
	case 0:
		return uint64(b & 0x3F), false, nil
	case 1:
		b2, err := d.byte()
		if err != nil {
			return 0, false, err
		}
		return uint64(b&0x3F)<<8 | uint64(b2), false, nil
	case 3:
		return uint64(b & 0x3F), true, nil
	}
	switch b {
	case 0x80:
		p, err := d.src.readN(4)
		if err != nil {
			return 0, false, err
		}
		return uint64(binary.BigEndian.Uint32(p)), false, nil
	case 0x81:
		p, err := d.src.readN(8)
		if err != nil {
			return 0, false, err
		}
		return binary.BigEndian.Uint64(p), false, nil
	}
	return 0, false, formatErr("unknown length encoding 0x%02x", b)
}

// plainLen reads a length that may not be a special encoding.
func (d *decoder) plainLen() (uint64, error) {
	l, enc, err := d.length()
	if err == nil && enc {
		err = formatErr("unexpected encoded length")
	}
	return l, err
}

// count reads an element count, each element taking at least minBytes.
func (d *decoder) count(minBytes uint64) (uint64, error) {
	n, err := d.plainLen()
	if err != nil {
		return 0, err
	}
	if r := d.src.remaining(); r >= 0 && (n > uint64(r) || n*minBytes > uint64(r)) {
		return 0, formatErr("count %d exceeds the input", n)
	}
	return n, nil
}

// capHint bounds a preallocation.
func capHint(n uint64) int {
	return int(min(n, 1024))
}

// string reads a string object (rdbGenericLoadStringObject).
func (d *decoder) string() ([]byte, error) {
	l, enc, err := d.length()
	if err != nil {
		return nil, err
	}
	if !enc {
		p, err := d.src.readN(l)
		if err != nil {
			return nil, err
		}
		return bytes.Clone(p), nil
	}
	switch l {
	case encInt8:
		b, err := d.src.readN(1)
		if err != nil {
			return nil, err
		}
		return strconv.AppendInt(nil, int64(int8(b[0])), 10), nil
	case encInt16:
		b, err := d.src.readN(2)
		if err != nil {
			return nil, err
		}
		return strconv.AppendInt(nil, int64(int16(binary.LittleEndian.Uint16(b))), 10), nil
	case encInt32:
		b, err := d.src.readN(4)
		if err != nil {
			return nil, err
		}
		return strconv.AppendInt(nil, int64(int32(binary.LittleEndian.Uint32(b))), 10), nil
	case encLZF:
		clen, err := d.plainLen()
		if err != nil {
			return nil, err
		}
		ulen, err := d.plainLen()
		if err != nil {
			return nil, err
		}
		// A byte of LZF expands to at most 88 bytes or so.
		if clen == 0 || ulen == 0 || clen > 1<<40 || ulen > clen*100+64 {
			return nil, formatErr("impossible LZF lengths %d/%d", clen, ulen)
		}
		c, err := d.src.readN(clen)
		if err != nil {
			return nil, err
		}
		out, ok := lzfDecompress(c, int(ulen))
		if !ok {
			return nil, formatErr("invalid LZF data")
		}
		return out, nil
	}
	return nil, formatErr("unknown string encoding %d", l)
}

func (d *decoder) binaryDouble() (float64, error) {
	b, err := d.src.readN(8)
	if err != nil {
		return 0, err
	}
	f := math.Float64frombits(binary.LittleEndian.Uint64(b))
	if math.IsNaN(f) {
		return 0, formatErr("NaN score")
	}
	return f, nil
}

// asciiDouble reads rdbLoadDoubleValue's encoding (RDB_TYPE_ZSET).
func (d *decoder) asciiDouble() (float64, error) {
	b, err := d.byte()
	if err != nil {
		return 0, err
	}
	switch b {
	case 253:
		return 0, formatErr("NaN score")
	case 254:
		return math.Inf(1), nil
	case 255:
		return math.Inf(-1), nil
	}
	p, err := d.src.readN(uint64(b))
	if err != nil {
		return 0, err
	}
	return parseScore(p)
}

// parseScore parses a score as strtod would.
func parseScore(p []byte) (float64, error) {
	f, err := strconv.ParseFloat(string(p), 64)
	if err != nil {
		var ne *strconv.NumError
		if !errors.As(err, &ne) || ne.Err != strconv.ErrRange {
			return 0, formatErr("invalid score %q", p)
		}
	}
	if math.IsNaN(f) {
		return 0, formatErr("NaN score")
	}
	return f, nil
}

// object reads the object of type t.
func (d *decoder) object(t byte) (*Value, error) {
	switch t {
	case typeString:
		s, err := d.string()
		if err != nil {
			return nil, err
		}
		return &Value{Kind: KindString, String: s}, nil
	case typeList, typeListZiplist, typeListQuicklist, typeListQuicklist2:
		l, err := d.list(t)
		if err != nil {
			return nil, err
		}
		return &Value{Kind: KindList, List: l}, nil
	case typeSet, typeSetIntset, typeSetListpack:
		s, err := d.set(t)
		if err != nil {
			return nil, err
		}
		return &Value{Kind: KindSet, Set: s}, nil
	case typeZSet, typeZSet2, typeZSetZiplist, typeZSetListpack:
		z, err := d.zset(t)
		if err != nil {
			return nil, err
		}
		return &Value{Kind: KindZSet, ZSet: z}, nil
	case typeHash, typeHashZipmap, typeHashZiplist, typeHashListpack:
		h, err := d.hash(t)
		if err != nil {
			return nil, err
		}
		return &Value{Kind: KindHash, Hash: h}, nil
	case typeStreamListpacks, typeStreamListpacks2, typeStreamListpacks3:
		s, err := d.stream(t)
		if err != nil {
			return nil, err
		}
		return &Value{Kind: KindStream, Stream: s}, nil
	case typeModulePreGA, typeModule2:
		return nil, formatErr("module type %d not supported", t)
	case 22, 23, 24, 25:
		return nil, formatErr("hash with field expirations (RDB type %d) not supported", t)
	}
	return nil, formatErr("unknown object type %d", t)
}

func (d *decoder) list(t byte) ([][]byte, error) {
	switch t {
	case typeList:
		n, err := d.count(1)
		if err != nil {
			return nil, err
		}
		out := make([][]byte, 0, capHint(n))
		for ; n > 0; n-- {
			s, err := d.string()
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	case typeListZiplist:
		zl, err := d.string()
		if err != nil {
			return nil, err
		}
		return d.ziplist(zl)
	}
	n, err := d.count(2)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for ; n > 0; n-- {
		container := uint64(quicklistPacked)
		if t == typeListQuicklist2 {
			if container, err = d.plainLen(); err != nil {
				return nil, err
			}
			if container != quicklistPlain && container != quicklistPacked {
				return nil, formatErr("unknown quicklist container %d", container)
			}
		}
		s, err := d.string()
		if err != nil {
			return nil, err
		}
		if container == quicklistPlain {
			out = append(out, s)
			continue
		}
		var elems [][]byte
		if t == typeListQuicklist {
			elems, err = d.ziplist(s)
		} else {
			elems, err = d.listpack(s)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, elems...)
	}
	return out, nil
}

func (d *decoder) ziplist(zl []byte) ([][]byte, error) {
	out, err := zlParse(zl)
	if err != nil {
		return nil, formatErr("%v", err)
	}
	return out, nil
}

func (d *decoder) listpack(lp []byte) ([][]byte, error) {
	vals, err := lpParse(lp)
	if err != nil {
		return nil, formatErr("%v", err)
	}
	out := make([][]byte, len(vals))
	for i, v := range vals {
		out[i] = v.bytes()
	}
	return out, nil
}

// dupCheck reports repeated members.
type dupCheck map[string]struct{}

func (c dupCheck) add(b []byte) error {
	if _, ok := c[string(b)]; ok {
		return formatErr("duplicate member %q", b)
	}
	c[string(b)] = struct{}{}
	return nil
}

func (d *decoder) set(t byte) ([][]byte, error) {
	var out [][]byte
	switch t {
	case typeSet:
		n, err := d.count(1)
		if err != nil {
			return nil, err
		}
		out = make([][]byte, 0, capHint(n))
		for ; n > 0; n-- {
			s, err := d.string()
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
	case typeSetIntset:
		s, err := d.string()
		if err != nil {
			return nil, err
		}
		ints, err := intsetParse(s)
		if err != nil {
			return nil, formatErr("%v", err)
		}
		out = make([][]byte, len(ints))
		for i, v := range ints {
			out[i] = strconv.AppendInt(nil, v, 10)
		}
	default:
		s, err := d.string()
		if err != nil {
			return nil, err
		}
		if out, err = d.listpack(s); err != nil {
			return nil, err
		}
	}
	seen := make(dupCheck, len(out))
	for _, m := range out {
		if err := seen.add(m); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (d *decoder) zset(t byte) ([]ZMember, error) {
	var out []ZMember
	switch t {
	case typeZSet, typeZSet2:
		n, err := d.count(2)
		if err != nil {
			return nil, err
		}
		out = make([]ZMember, 0, capHint(n))
		for ; n > 0; n-- {
			m, err := d.string()
			if err != nil {
				return nil, err
			}
			var f float64
			if t == typeZSet {
				f, err = d.asciiDouble()
			} else {
				f, err = d.binaryDouble()
			}
			if err != nil {
				return nil, err
			}
			out = append(out, ZMember{Member: m, Score: f})
		}
	default:
		elems, err := d.packedPairs(t == typeZSetZiplist, "sorted set")
		if err != nil {
			return nil, err
		}
		out = make([]ZMember, 0, len(elems)/2)
		for i := 0; i < len(elems); i += 2 {
			f, err := parseScore(elems[i+1])
			if err != nil {
				return nil, err
			}
			out = append(out, ZMember{Member: elems[i], Score: f})
		}
	}
	seen := make(dupCheck, len(out))
	for _, m := range out {
		if err := seen.add(m.Member); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// packedPairs reads a ziplist (or listpack) string of name, value pairs.
func (d *decoder) packedPairs(ziplist bool, what string) ([][]byte, error) {
	s, err := d.string()
	if err != nil {
		return nil, err
	}
	var elems [][]byte
	if ziplist {
		elems, err = d.ziplist(s)
	} else {
		elems, err = d.listpack(s)
	}
	if err != nil {
		return nil, err
	}
	if len(elems)%2 != 0 {
		return nil, formatErr("odd number of %s elements", what)
	}
	return elems, nil
}

func (d *decoder) hash(t byte) ([]Field, error) {
	var out []Field
	switch t {
	case typeHash:
		n, err := d.count(2)
		if err != nil {
			return nil, err
		}
		out = make([]Field, 0, capHint(n))
		for ; n > 0; n-- {
			k, err := d.string()
			if err != nil {
				return nil, err
			}
			v, err := d.string()
			if err != nil {
				return nil, err
			}
			out = append(out, Field{Name: k, Value: v})
		}
	case typeHashZipmap:
		s, err := d.string()
		if err != nil {
			return nil, err
		}
		if out, err = zipmapParse(s); err != nil {
			return nil, formatErr("%v", err)
		}
	default:
		elems, err := d.packedPairs(t == typeHashZiplist, "hash")
		if err != nil {
			return nil, err
		}
		out = make([]Field, 0, len(elems)/2)
		for i := 0; i < len(elems); i += 2 {
			out = append(out, Field{Name: elems[i], Value: elems[i+1]})
		}
	}
	seen := make(dupCheck, len(out))
	for _, f := range out {
		if err := seen.add(f.Name); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// DecodeDump parses a DUMP payload: ErrPayload (wrapped) if the footer is
// wrong, ErrFormat (wrapped) if the object is.
func DecodeDump(payload []byte) (*Value, error) {
	if len(payload) < 10 {
		return nil, fmt.Errorf("%w: payload of %d bytes", ErrPayload, len(payload))
	}
	n := len(payload)
	ver := binary.LittleEndian.Uint16(payload[n-10:])
	if ver > 12 {
		return nil, fmt.Errorf("%w: RDB version %d", ErrPayload, ver)
	}
	if crc := binary.LittleEndian.Uint64(payload[n-8:]); crc != crc64Update(0, payload[:n-8]) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrPayload)
	}
	src := &sliceSource{b: payload[:n-10]}
	d := &decoder{src: src}
	t, err := d.byte()
	if err != nil {
		return nil, formatErr("empty payload")
	}
	v, err := d.object(t)
	if err != nil {
		if errors.Is(err, ErrFormat) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	if src.remaining() != 0 {
		return nil, formatErr("%d trailing bytes", src.remaining())
	}
	return v, nil
}

// sortStreamEntries orders entries by ID and rejects duplicates.
func sortStreamEntries(es []StreamEntry) error {
	sort.SliceStable(es, func(i, j int) bool { return idLess(es[i].ID, es[j].ID) })
	for i := 1; i < len(es); i++ {
		if es[i].ID == es[i-1].ID {
			return formatErr("duplicate stream ID %d-%d", es[i].ID.Ms, es[i].ID.Seq)
		}
	}
	return nil
}

func idLess(a, b StreamID) bool {
	return a.Ms < b.Ms || (a.Ms == b.Ms && a.Seq < b.Seq)
}
