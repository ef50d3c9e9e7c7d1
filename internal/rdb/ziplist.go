package rdb

import (
	"encoding/binary"
	"errors"
	"sort"
	"strconv"
)

var (
	errZiplist = errors.New("invalid ziplist")
	errZipmap  = errors.New("invalid zipmap")
	errIntset  = errors.New("invalid intset")
)

// zlParse validates a ziplist (Redis's ziplist.c, RDB versions up to 9)
// and returns its entries as strings (integers in decimal).
func zlParse(zl []byte) ([][]byte, error) {
	if len(zl) < 11 || int(binary.LittleEndian.Uint32(zl)) != len(zl) || zl[len(zl)-1] != 0xFF {
		return nil, errZiplist
	}
	tail := int(binary.LittleEndian.Uint32(zl[4:]))
	count := int(binary.LittleEndian.Uint16(zl[8:]))
	end := len(zl) - 1
	var out [][]byte
	if count != 65535 {
		out = make([][]byte, 0, min(count, len(zl)/2))
	}
	p := 10
	prevlen := 0
	last := -1
	for p < end {
		start := p
		// prevlen
		if zl[p] < 254 {
			if int(zl[p]) != prevlen {
				return nil, errZiplist
			}
			p++
		} else {
			if zl[p] == 255 || p+5 > end || int64(binary.LittleEndian.Uint32(zl[p+1:])) != int64(prevlen) {
				return nil, errZiplist
			}
			p += 5
		}
		if p >= end {
			return nil, errZiplist
		}
		c := zl[p]
		var v []byte
		need := func(n int) bool { return n >= 0 && p+n <= end }
		switch c >> 6 {
		case 0:
			n := int(c & 0x3F)
			if !need(1 + n) {
				return nil, errZiplist
			}
			v = zl[p+1 : p+1+n]
			p += 1 + n
		case 1:
			if !need(2) {
				return nil, errZiplist
			}
			n := int(c&0x3F)<<8 | int(zl[p+1])
			if !need(2 + n) {
				return nil, errZiplist
			}
			v = zl[p+2 : p+2+n]
			p += 2 + n
		case 2:
			if c != 0x80 || !need(5) {
				return nil, errZiplist
			}
			n := uint64(binary.BigEndian.Uint32(zl[p+1:]))
			if n > uint64(end-p-5) {
				return nil, errZiplist
			}
			v = zl[p+5 : p+5+int(n)]
			p += 5 + int(n)
		default:
			var i int64
			switch c {
			case 0xC0:
				if !need(3) {
					return nil, errZiplist
				}
				i = int64(int16(binary.LittleEndian.Uint16(zl[p+1:])))
				p += 3
			case 0xD0:
				if !need(5) {
					return nil, errZiplist
				}
				i = int64(int32(binary.LittleEndian.Uint32(zl[p+1:])))
				p += 5
			case 0xE0:
				if !need(9) {
					return nil, errZiplist
				}
				i = int64(binary.LittleEndian.Uint64(zl[p+1:]))
				p += 9
			case 0xF0:
				if !need(4) {
					return nil, errZiplist
				}
				u := uint32(zl[p+1]) | uint32(zl[p+2])<<8 | uint32(zl[p+3])<<16
				i = int64(int32(u<<8) >> 8)
				p += 4
			case 0xFE:
				if !need(2) {
					return nil, errZiplist
				}
				i = int64(int8(zl[p+1]))
				p += 2
			default:
				if c < 0xF1 || c > 0xFD {
					return nil, errZiplist
				}
				i = int64(c&0x0F) - 1
				p++
			}
			v = strconv.AppendInt(nil, i, 10)
		}
		prevlen = p - start
		last = start
		out = append(out, v)
	}
	if p != end || (count != 65535 && count != len(out)) {
		return nil, errZiplist
	}
	if (last == -1 && tail != 10) || (last != -1 && tail != last) {
		return nil, errZiplist
	}
	return out, nil
}

// zipmapParse validates a zipmap (RDB_TYPE_HASH_ZIPMAP) and returns its
// fields.
func zipmapParse(zm []byte) ([]Field, error) {
	if len(zm) < 2 || zm[len(zm)-1] != 0xFF {
		return nil, errZipmap
	}
	p := 1
	end := len(zm) - 1
	readLen := func() (int, bool) {
		if p >= end {
			return 0, false
		}
		if zm[p] < 254 {
			p++
			return int(zm[p-1]), true
		}
		if zm[p] == 255 || p+5 > end {
			return 0, false
		}
		n := binary.LittleEndian.Uint32(zm[p+1:])
		p += 5
		if uint64(n) > uint64(end-p) {
			return 0, false
		}
		return int(n), true
	}
	var out []Field
	for p < end {
		kl, ok := readLen()
		if !ok || kl > end-p {
			return nil, errZipmap
		}
		k := zm[p : p+kl]
		p += kl
		vl, ok := readLen()
		if !ok || p >= end {
			return nil, errZipmap
		}
		free := int(zm[p])
		p++
		if vl > end-p || free > end-p-vl {
			return nil, errZipmap
		}
		v := zm[p : p+vl]
		p += vl + free
		out = append(out, Field{Name: k, Value: v})
	}
	return out, nil
}

// intsetParse validates an intset and returns its members.
func intsetParse(is []byte) ([]int64, error) {
	if len(is) < 8 {
		return nil, errIntset
	}
	enc := binary.LittleEndian.Uint32(is)
	n := uint64(binary.LittleEndian.Uint32(is[4:]))
	if (enc != 2 && enc != 4 && enc != 8) || uint64(len(is)-8) != n*uint64(enc) {
		return nil, errIntset
	}
	out := make([]int64, n)
	for i := range out {
		b := is[8+i*int(enc):]
		switch enc {
		case 2:
			out[i] = int64(int16(binary.LittleEndian.Uint16(b)))
		case 4:
			out[i] = int64(int32(binary.LittleEndian.Uint32(b)))
		default:
			out[i] = int64(binary.LittleEndian.Uint64(b))
		}
		if i > 0 && out[i] <= out[i-1] {
			return nil, errIntset
		}
	}
	return out, nil
}

// intsetBuild returns the intset of vals (deduplicated), in the smallest
// encoding.
func intsetBuild(vals []int64) []byte {
	s := append([]int64(nil), vals...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	u := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			u = append(u, v)
		}
	}
	enc := 2
	for _, v := range u {
		if v < -2147483648 || v > 2147483647 {
			enc = 8
		} else if (v < -32768 || v > 32767) && enc < 4 {
			enc = 4
		}
	}
	out := make([]byte, 8+enc*len(u))
	binary.LittleEndian.PutUint32(out, uint32(enc))
	binary.LittleEndian.PutUint32(out[4:], uint32(len(u)))
	for i, v := range u {
		b := out[8+i*enc:]
		switch enc {
		case 2:
			binary.LittleEndian.PutUint16(b, uint16(v))
		case 4:
			binary.LittleEndian.PutUint32(b, uint32(v))
		default:
			binary.LittleEndian.PutUint64(b, uint64(v))
		}
	}
	return out
}
