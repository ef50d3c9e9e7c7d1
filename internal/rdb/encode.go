package rdb

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
)

// Object types and encodings (Redis's rdb.h).
const (
	typeString           = 0
	typeList             = 1
	typeSet              = 2
	typeZSet             = 3
	typeHash             = 4
	typeZSet2            = 5
	typeModulePreGA      = 6
	typeModule2          = 7
	typeHashZipmap       = 9
	typeListZiplist      = 10
	typeSetIntset        = 11
	typeZSetZiplist      = 12
	typeHashZiplist      = 13
	typeListQuicklist    = 14
	typeStreamListpacks  = 15
	typeHashListpack     = 16
	typeZSetListpack     = 17
	typeListQuicklist2   = 18
	typeStreamListpacks2 = 19
	typeSetListpack      = 20
	typeStreamListpacks3 = 21

	encInt8  = 0
	encInt16 = 1
	encInt32 = 2
	encLZF   = 3

	quicklistPlain  = 1
	quicklistPacked = 2

	streamFlagDeleted    = 1
	streamFlagSameFields = 2
)

// defaults fills the zero fields of o with Redis's defaults.
func (o EncodeOptions) defaults() EncodeOptions {
	if o.HashMaxListpackEntries == 0 {
		o.HashMaxListpackEntries = 512
	}
	if o.HashMaxListpackValue == 0 {
		o.HashMaxListpackValue = 64
	}
	if o.ZSetMaxListpackEntries == 0 {
		o.ZSetMaxListpackEntries = 128
	}
	if o.ZSetMaxListpackValue == 0 {
		o.ZSetMaxListpackValue = 64
	}
	if o.SetMaxIntsetEntries == 0 {
		o.SetMaxIntsetEntries = 512
	}
	if o.ListMaxListpackSize == 0 {
		o.ListMaxListpackSize = -2
	}
	return o
}

// encoder appends RDB encodings to buf.
type encoder struct {
	buf      []byte
	compress bool
}

func (e *encoder) len(l uint64) {
	switch {
	case l < 1<<6:
		e.buf = append(e.buf, byte(l))
	case l < 1<<14:
		e.buf = append(e.buf, byte(l>>8)|0x40, byte(l))
	case l <= math.MaxUint32:
		e.buf = append(e.buf, 0x80)
		e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(l))
	default:
		e.buf = append(e.buf, 0x81)
		e.buf = binary.BigEndian.AppendUint64(e.buf, l)
	}
}

// str is rdbSaveRawString.
func (e *encoder) str(s []byte) {
	if len(s) <= 11 {
		if v, ok := lpStringToInt64(s); ok {
			switch {
			case v >= -(1<<7) && v <= 1<<7-1:
				e.buf = append(e.buf, 0xC0|encInt8, byte(v))
				return
			case v >= -(1<<15) && v <= 1<<15-1:
				e.buf = append(e.buf, 0xC0|encInt16, byte(v), byte(v>>8))
				return
			case v >= -(1<<31) && v <= 1<<31-1:
				e.buf = append(e.buf, 0xC0|encInt32, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
				return
			}
		}
	}
	if e.compress && len(s) > 20 {
		if c := lzfCompress(s, len(s)-4); c != nil {
			e.buf = append(e.buf, 0xC0|encLZF)
			e.len(uint64(len(c)))
			e.len(uint64(len(s)))
			e.buf = append(e.buf, c...)
			return
		}
	}
	e.len(uint64(len(s)))
	e.buf = append(e.buf, s...)
}

func (e *encoder) ms(t int64) {
	e.buf = binary.LittleEndian.AppendUint64(e.buf, uint64(t))
}

// EncodeDump returns v serialized as DUMP returns it: the object, the
// 2-byte RDB version (little-endian) and the CRC64 of both
// (little-endian), as Redis's createDumpPayload.
func EncodeDump(v *Value, o EncodeOptions) ([]byte, error) {
	e := &encoder{compress: o.Compress}
	if err := e.object(v, o.defaults()); err != nil {
		return nil, err
	}
	e.buf = binary.LittleEndian.AppendUint16(e.buf, Version)
	e.buf = binary.LittleEndian.AppendUint64(e.buf, crc64Update(0, e.buf))
	return e.buf, nil
}

// object appends v's type byte and encoding.
func (e *encoder) object(v *Value, o EncodeOptions) error {
	if v == nil {
		return errors.New("rdb: nil value")
	}
	switch v.Kind {
	case KindString:
		e.buf = append(e.buf, typeString)
		e.str(v.String)
	case KindList:
		e.buf = append(e.buf, typeListQuicklist2)
		e.list(v.List, o)
	case KindSet:
		e.set(v.Set, o)
	case KindZSet:
		e.zset(v.ZSet, o)
	case KindHash:
		e.hash(v.Hash, o)
	case KindStream:
		if v.Stream == nil {
			return errors.New("rdb: stream value without Stream")
		}
		e.buf = append(e.buf, typeStreamListpacks2)
		return e.stream(v.Stream)
	default:
		return fmt.Errorf("rdb: unknown kind %d", v.Kind)
	}
	return nil
}

// list writes a quicklist as Redis 7.0 builds it by RPUSHing the elements
// in order (quicklistPushTail, _quicklistNodeAllowInsert).
func (e *encoder) list(elems [][]byte, o EncodeOptions) {
	fill := o.ListMaxListpackSize
	var nodes []*lpBuilder
	var cur *lpBuilder
	for _, el := range elems {
		if cur == nil || !quicklistAllowInsert(cur, fill, len(el)) {
			cur = &lpBuilder{}
			nodes = append(nodes, cur)
		}
		cur.appendString(el)
	}
	e.len(uint64(len(nodes)))
	for _, n := range nodes {
		e.len(quicklistPacked)
		e.str(n.bytes())
	}
}

var quicklistOptimizationLevel = []int64{4096, 8192, 16384, 32768, 65536}

func quicklistAllowInsert(n *lpBuilder, fill int64, sz int) bool {
	newSz := int64(n.size()) + int64(sz) + 8
	if fill < 0 {
		off := -fill - 1
		if off < int64(len(quicklistOptimizationLevel)) && newSz <= quicklistOptimizationLevel[off] {
			return true
		}
		if off < int64(len(quicklistOptimizationLevel)) {
			return false
		}
	}
	if newSz > 8192 {
		return false
	}
	return int64(n.n) < fill
}

// set writes an intset when every member is an integer and they are few
// enough, else a hashtable set.
func (e *encoder) set(members [][]byte, o EncodeOptions) {
	if int64(len(members)) <= o.SetMaxIntsetEntries {
		ints := make([]int64, 0, len(members))
		for _, m := range members {
			v, ok := lpStringToInt64(m)
			if !ok {
				ints = nil
				break
			}
			ints = append(ints, v)
		}
		if ints != nil || len(members) == 0 {
			e.buf = append(e.buf, typeSetIntset)
			e.str(intsetBuild(ints))
			return
		}
	}
	e.buf = append(e.buf, typeSet)
	e.len(uint64(len(members)))
	for _, m := range members {
		e.str(m)
	}
}

func (e *encoder) hash(fields []Field, o EncodeOptions) {
	small := int64(len(fields)) <= o.HashMaxListpackEntries
	for _, f := range fields {
		if int64(len(f.Name)) > o.HashMaxListpackValue || int64(len(f.Value)) > o.HashMaxListpackValue {
			small = false
			break
		}
	}
	if small {
		var b lpBuilder
		for _, f := range fields {
			b.appendString(f.Name)
			b.appendString(f.Value)
		}
		e.buf = append(e.buf, typeHashListpack)
		e.str(b.bytes())
		return
	}
	e.buf = append(e.buf, typeHash)
	e.len(uint64(len(fields)))
	for _, f := range fields {
		e.str(f.Name)
		e.str(f.Value)
	}
}

// zsetLess is the skiplist's order: score, then member bytewise.
func zsetLess(a, b ZMember) bool {
	if a.Score != b.Score {
		return a.Score < b.Score
	}
	return bytes.Compare(a.Member, b.Member) < 0
}

func (e *encoder) zset(members []ZMember, o EncodeOptions) {
	s := append([]ZMember(nil), members...)
	sort.SliceStable(s, func(i, j int) bool { return zsetLess(s[i], s[j]) })
	small := int64(len(s)) <= o.ZSetMaxListpackEntries
	for _, m := range s {
		if int64(len(m.Member)) > o.ZSetMaxListpackValue {
			small = false
			break
		}
	}
	if small {
		var b lpBuilder
		for _, m := range s {
			b.appendString(m.Member)
			if l, ok := double2ll(m.Score); ok {
				b.appendInt(l)
			} else {
				b.appendString([]byte(d2string(m.Score)))
			}
		}
		e.buf = append(e.buf, typeZSetListpack)
		e.str(b.bytes())
		return
	}
	e.buf = append(e.buf, typeZSet2)
	e.len(uint64(len(s)))
	for i := len(s) - 1; i >= 0; i-- {
		e.str(s[i].Member)
		e.buf = binary.LittleEndian.AppendUint64(e.buf, math.Float64bits(s[i].Score))
	}
}

// double2ll is Redis's double2ll: d as an integer when it is integral and
// within ±2^62.
func double2ll(d float64) (int64, bool) {
	const lim = float64(math.MaxInt64 / 2)
	if d < -lim || d > lim || math.IsNaN(d) {
		return 0, false
	}
	l := int64(d)
	if float64(l) == d {
		return l, true
	}
	return 0, false
}

// d2string is Redis's d2string.
func d2string(d float64) string {
	switch {
	case math.IsNaN(d):
		return "nan"
	case math.IsInf(d, 1):
		return "inf"
	case math.IsInf(d, -1):
		return "-inf"
	case d == 0:
		if math.Signbit(d) {
			return "-0"
		}
		return "0"
	}
	if l, ok := double2ll(d); ok {
		return strconv.FormatInt(l, 10)
	}
	return strconv.FormatFloat(d, 'g', 17, 64)
}
