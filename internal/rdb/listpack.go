package rdb

import (
	"encoding/binary"
	"errors"
	"strconv"
)

// Listpacks, as Redis's listpack.c: a 6-byte header (total bytes, uint32
// LE; number of elements, uint16 LE, 65535 when unknown), the entries
// (encoding, data, backlen) and 0xFF.

const lpHdrSize = 6

// lpStringToInt64 is Redis's lpStringToInt64 (and string2ll): whether s is
// the canonical decimal form of an int64.
func lpStringToInt64(s []byte) (int64, bool) {
	n := len(s)
	if n == 0 || n >= 21 {
		return 0, false
	}
	if n == 1 && s[0] == '0' {
		return 0, true
	}
	i := 0
	neg := false
	if s[0] == '-' {
		neg = true
		i++
		if i == n {
			return 0, false
		}
	}
	if s[i] < '1' || s[i] > '9' {
		return 0, false
	}
	var v uint64
	for ; i < n; i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if v > (1<<64-1)/10 {
			return 0, false
		}
		v *= 10
		if v > 1<<64-1-uint64(c-'0') {
			return 0, false
		}
		v += uint64(c - '0')
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return -int64(v), true
	}
	if v > 1<<63-1 {
		return 0, false
	}
	return int64(v), true
}

// lpBuilder builds a listpack by appending entries.
type lpBuilder struct {
	body []byte
	n    int
}

func lpBacklen(buf []byte, l uint64) []byte {
	switch {
	case l <= 127:
		return append(buf, byte(l))
	case l < 16383:
		return append(buf, byte(l>>7), byte(l&127)|128)
	case l < 2097151:
		return append(buf, byte(l>>14), byte((l>>7)&127)|128, byte(l&127)|128)
	case l < 268435455:
		return append(buf, byte(l>>21), byte((l>>14)&127)|128, byte((l>>7)&127)|128, byte(l&127)|128)
	}
	return append(buf, byte(l>>28), byte((l>>21)&127)|128, byte((l>>14)&127)|128, byte((l>>7)&127)|128, byte(l&127)|128)
}

// lpIntEntrySize is the encoded size of integer v, backlen included.
func lpIntEncode(v int64) []byte {
	switch {
	case v >= 0 && v <= 127:
		return []byte{byte(v)}
	case v >= -4096 && v <= 4095:
		u := uint64(v)
		if v < 0 {
			u = uint64((1 << 13) + v)
		}
		return []byte{byte(u>>8) | 0xC0, byte(u)}
	case v >= -32768 && v <= 32767:
		u := uint16(v)
		return []byte{0xF1, byte(u), byte(u >> 8)}
	case v >= -8388608 && v <= 8388607:
		u := uint32(v)
		return []byte{0xF2, byte(u), byte(u >> 8), byte(u >> 16)}
	case v >= -2147483648 && v <= 2147483647:
		u := uint32(v)
		return []byte{0xF3, byte(u), byte(u >> 8), byte(u >> 16), byte(u >> 24)}
	}
	b := make([]byte, 9)
	b[0] = 0xF4
	binary.LittleEndian.PutUint64(b[1:], uint64(v))
	return b
}

func (b *lpBuilder) appendInt(v int64) {
	enc := lpIntEncode(v)
	b.body = append(b.body, enc...)
	b.body = lpBacklen(b.body, uint64(len(enc)))
	b.n++
}

func (b *lpBuilder) appendString(s []byte) {
	if v, ok := lpStringToInt64(s); ok {
		b.appendInt(v)
		return
	}
	b.appendRawString(s)
}

func (b *lpBuilder) appendRawString(s []byte) {
	l := len(s)
	var hdr int
	switch {
	case l < 64:
		b.body = append(b.body, byte(l)|0x80)
		hdr = 1
	case l < 4096:
		b.body = append(b.body, byte(l>>8)|0xE0, byte(l))
		hdr = 2
	default:
		b.body = append(b.body, 0xF0, byte(l), byte(l>>8), byte(l>>16), byte(l>>24))
		hdr = 5
	}
	b.body = append(b.body, s...)
	b.body = lpBacklen(b.body, uint64(hdr+l))
	b.n++
}

// lpEntrySize is the size appendString would add for s.
func lpEntrySize(s []byte) int {
	var l int
	if v, ok := lpStringToInt64(s); ok {
		l = len(lpIntEncode(v))
	} else {
		switch n := len(s); {
		case n < 64:
			l = 1 + n
		case n < 4096:
			l = 2 + n
		default:
			l = 5 + n
		}
	}
	return l + len(lpBacklen(nil, uint64(l)))
}

func (b *lpBuilder) size() int { return lpHdrSize + len(b.body) + 1 }

func (b *lpBuilder) bytes() []byte {
	out := make([]byte, lpHdrSize, b.size())
	binary.LittleEndian.PutUint32(out, uint32(b.size()))
	n := b.n
	if n > 65535 {
		n = 65535
	}
	binary.LittleEndian.PutUint16(out[4:], uint16(n))
	out = append(out, b.body...)
	return append(out, 0xFF)
}

// lpVal is a listpack entry: a string, or an integer.
type lpVal struct {
	s     []byte
	i     int64
	isInt bool
}

func (v lpVal) bytes() []byte {
	if v.isInt {
		return strconv.AppendInt(nil, v.i, 10)
	}
	return v.s
}

var errListpack = errors.New("invalid listpack")

// lpParse validates the listpack lp and returns its entries.
func lpParse(lp []byte) ([]lpVal, error) {
	if len(lp) < lpHdrSize+1 || int(binary.LittleEndian.Uint32(lp)) != len(lp) || lp[len(lp)-1] != 0xFF {
		return nil, errListpack
	}
	numele := int(binary.LittleEndian.Uint16(lp[4:]))
	var vals []lpVal
	if numele != 65535 {
		vals = make([]lpVal, 0, min(numele, len(lp)/2))
	}
	p := lpHdrSize
	end := len(lp) - 1
	for p < end {
		start := p
		c := lp[p]
		var v lpVal
		need := func(n int) bool { return n >= 0 && p+n <= end }
		switch {
		case c&0x80 == 0:
			v = lpVal{i: int64(c & 0x7F), isInt: true}
			p++
		case c&0xC0 == 0x80:
			n := int(c & 0x3F)
			if !need(1 + n) {
				return nil, errListpack
			}
			v = lpVal{s: lp[p+1 : p+1+n]}
			p += 1 + n
		case c&0xE0 == 0xC0:
			if !need(2) {
				return nil, errListpack
			}
			u := uint64(c&0x1F)<<8 | uint64(lp[p+1])
			i := int64(u)
			if u >= 1<<12 {
				i = int64(u) - (1 << 13)
			}
			v = lpVal{i: i, isInt: true}
			p += 2
		case c&0xF0 == 0xE0:
			if !need(2) {
				return nil, errListpack
			}
			n := int(c&0x0F)<<8 | int(lp[p+1])
			if !need(2 + n) {
				return nil, errListpack
			}
			v = lpVal{s: lp[p+2 : p+2+n]}
			p += 2 + n
		case c == 0xF1:
			if !need(3) {
				return nil, errListpack
			}
			v = lpVal{i: int64(int16(binary.LittleEndian.Uint16(lp[p+1:]))), isInt: true}
			p += 3
		case c == 0xF2:
			if !need(4) {
				return nil, errListpack
			}
			u := uint32(lp[p+1]) | uint32(lp[p+2])<<8 | uint32(lp[p+3])<<16
			v = lpVal{i: int64(int32(u<<8) >> 8), isInt: true}
			p += 4
		case c == 0xF3:
			if !need(5) {
				return nil, errListpack
			}
			v = lpVal{i: int64(int32(binary.LittleEndian.Uint32(lp[p+1:]))), isInt: true}
			p += 5
		case c == 0xF4:
			if !need(9) {
				return nil, errListpack
			}
			v = lpVal{i: int64(binary.LittleEndian.Uint64(lp[p+1:])), isInt: true}
			p += 9
		case c == 0xF0:
			if !need(5) {
				return nil, errListpack
			}
			n := uint64(binary.LittleEndian.Uint32(lp[p+1:]))
			if n > uint64(end-p-5) {
				return nil, errListpack
			}
			v = lpVal{s: lp[p+5 : p+5+int(n)]}
			p += 5 + int(n)
		default:
			return nil, errListpack
		}
		// The backlen must encode the entry's length.
		bl := lpBacklen(nil, uint64(p-start))
		if p+len(bl) > end || string(lp[p:p+len(bl)]) != string(bl) {
			return nil, errListpack
		}
		p += len(bl)
		vals = append(vals, v)
	}
	if numele != 65535 && numele != len(vals) {
		return nil, errListpack
	}
	return vals, nil
}
