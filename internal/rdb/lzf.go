package rdb

import "sync"

// LZF as Redis's lzf_c.c and lzf_d.c (liblzf 3.6 with Redis's lzfP.h:
// HLOG 16, VERY_FAST, not ULTRA_FAST). The compressor reproduces Redis's
// output byte for byte, assuming its (uninitialized) hash table holds no
// usable stale positions, which is what a fresh stack frame gives.

const (
	lzfHLog   = 16
	lzfHSize  = 1 << lzfHLog
	lzfMaxLit = 1 << 5
	lzfMaxOff = 1 << 13
	lzfMaxRef = (1 << 8) + (1 << 3)
)

func lzfIdx(h uint32) uint32 {
	return ((h >> (3*8 - lzfHLog)) - h*5) & (lzfHSize - 1)
}

// lzfState is a hash table of positions, cleared after use by resetting
// only the slots that were set.
type lzfState struct {
	htab    []int32
	touched []uint32
}

var lzfPool = sync.Pool{New: func() any { return &lzfState{htab: make([]int32, lzfHSize)} }}

func (s *lzfState) set(slot uint32, pos int) {
	s.htab[slot] = int32(pos + 1)
	s.touched = append(s.touched, slot)
}

func (s *lzfState) release() {
	for _, t := range s.touched {
		s.htab[t] = 0
	}
	s.touched = s.touched[:0]
	lzfPool.Put(s)
}

// lzfCompress compresses in into at most outLen bytes; it returns nil
// when the output does not fit (as lzf_compress returns 0).
func lzfCompress(in []byte, outLen int) []byte {
	inLen := len(in)
	if inLen == 0 || outLen == 0 || inLen >= 1<<31-1 {
		return nil
	}
	// Positions are stored plus one, so that zero means empty.
	st := lzfPool.Get().(*lzfState)
	defer st.release()
	htab := st.htab
	out := make([]byte, outLen)
	op := 0
	ip := 0
	lit := 0
	op++ // start run
	hval := uint32(in[0])<<8 | uint32(in[1%inLen])
	if inLen < 2 {
		hval = uint32(in[0]) << 8
	}
	for ip < inLen-2 {
		hval = hval<<8 | uint32(in[ip+2])
		slot := lzfIdx(hval)
		ref := int(htab[slot]) - 1
		htab[slot] = int32(ip + 1)
		st.touched = append(st.touched, slot)
		if ref > 0 && ref < ip && ip-ref-1 < lzfMaxOff &&
			in[ref+2] == in[ip+2] && in[ref] == in[ip] && in[ref+1] == in[ip+1] {
			off := ip - ref - 1
			l := 2
			maxlen := inLen - ip - l
			if maxlen > lzfMaxRef {
				maxlen = lzfMaxRef
			}
			if op+3+1 >= outLen {
				b := 0
				if lit == 0 {
					b = 1
				}
				if op-b+3+1 >= outLen {
					return nil
				}
			}
			out[op-lit-1] = byte(lit - 1)
			if lit == 0 {
				op--
			}
			matched := false
			if maxlen > 16 {
				// Redis unrolls 16 steps without checking maxlen.
				for k := 0; k < 16; k++ {
					l++
					if in[ref+l] != in[ip+l] {
						matched = true
						break
					}
				}
			}
			for !matched {
				l++
				if !(l < maxlen && in[ref+l] == in[ip+l]) {
					break
				}
			}
			l -= 2
			ip++
			if l < 7 {
				out[op] = byte(off>>8) + byte(l<<5)
				op++
			} else {
				out[op] = byte(off>>8) + (7 << 5)
				out[op+1] = byte(l - 7)
				op += 2
			}
			out[op] = byte(off)
			op++
			lit = 0
			op++
			ip += l + 1
			if ip >= inLen-2 {
				break
			}
			ip -= 2
			hval = uint32(in[ip])<<8 | uint32(in[ip+1])
			hval = hval<<8 | uint32(in[ip+2])
			st.set(lzfIdx(hval), ip)
			ip++
			hval = hval<<8 | uint32(in[ip+2])
			st.set(lzfIdx(hval), ip)
			ip++
		} else {
			if op >= outLen {
				return nil
			}
			lit++
			out[op] = in[ip]
			op++
			ip++
			if lit == lzfMaxLit {
				out[op-lit-1] = byte(lit - 1)
				lit = 0
				op++
			}
		}
	}
	if op+3 > outLen {
		return nil
	}
	for ip < inLen {
		lit++
		out[op] = in[ip]
		op++
		ip++
		if lit == lzfMaxLit {
			out[op-lit-1] = byte(lit - 1)
			lit = 0
			op++
		}
	}
	out[op-lit-1] = byte(lit - 1)
	if lit == 0 {
		op--
	}
	return out[:op]
}

// lzfDecompress decompresses in, which must expand to exactly outLen
// bytes.
func lzfDecompress(in []byte, outLen int) ([]byte, bool) {
	out := make([]byte, 0, min(outLen, 4*len(in)+64))
	ip := 0
	for ip < len(in) {
		ctrl := int(in[ip])
		ip++
		if ctrl < 1<<5 {
			n := ctrl + 1
			if ip+n > len(in) || len(out)+n > outLen {
				return nil, false
			}
			out = append(out, in[ip:ip+n]...)
			ip += n
			continue
		}
		n := ctrl >> 5
		if n == 7 {
			if ip >= len(in) {
				return nil, false
			}
			n += int(in[ip])
			ip++
		}
		if ip >= len(in) {
			return nil, false
		}
		ref := len(out) - ((ctrl & 0x1f) << 8) - 1 - int(in[ip])
		ip++
		n += 2
		if ref < 0 || len(out)+n > outLen {
			return nil, false
		}
		for i := 0; i < n; i++ {
			out = append(out, out[ref+i])
		}
	}
	if len(out) != outLen {
		return nil, false
	}
	return out, true
}
