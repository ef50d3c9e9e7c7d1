package script

import (
	"encoding/binary"
	"hash/crc64"
	"strconv"
	"strings"

	"github.com/kvorum/kvorum/internal/reply"
)

// FUNCTION DUMP and FUNCTION RESTORE payloads, in Redis 7.0's format: for
// each library the opcode RDB_OPCODE_FUNCTION2 and its code as an RDB
// string, then the RDB version (2 bytes, little endian) and the CRC64
// (Jones polynomial, as Redis's crc64, 8 bytes little endian) of all
// that precedes it.
//
// Dump writes the codes verbatim: Redis LZF-compresses a string longer
// than 20 bytes when that makes it shorter, so its payloads are often
// shorter than kvorum's; each server restores the other's. Restore reads
// every RDB string encoding (verbatim, integer, LZF).

const (
	rdbOpcodeFunction  = 246 // RDB_OPCODE_FUNCTION: Redis 7.0's release candidates
	rdbOpcodeFunction2 = 245 // RDB_OPCODE_FUNCTION2
	rdbVersion         = 10  // RDB_VERSION of Redis 7.0
)

// crcJones is the table of Redis's crc64 (reflected Jones polynomial
// 0xad93d23594c935a9, initial value 0, no final xor).
var crcJones = crc64.MakeTable(0x95ac9329ac4bc9b5)

// CRC64 is Redis's crc64(0, b).
func CRC64(b []byte) uint64 {
	var crc uint64
	for _, c := range b {
		crc = crcJones[byte(crc)^c] ^ crc>>8
	}
	return crc
}

// DumpLibraries returns FUNCTION DUMP's payload for the given library
// codes.
func DumpLibraries(codes [][]byte) []byte {
	var out []byte
	for _, c := range codes {
		out = append(out, rdbOpcodeFunction2)
		out = appendRDBLen(out, uint64(len(c)))
		out = append(out, c...)
	}
	out = binary.LittleEndian.AppendUint16(out, rdbVersion)
	return binary.LittleEndian.AppendUint64(out, CRC64(out))
}

func appendRDBLen(b []byte, n uint64) []byte {
	switch {
	case n < 1<<6:
		return append(b, byte(n))
	case n < 1<<14:
		return append(b, byte(n>>8)|0x40, byte(n))
	case n <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(b, 0x80), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, 0x81), n)
}

// ParseDump returns the library codes of a FUNCTION RESTORE payload, in
// payload order, or Redis's error text (without "ERR ").
func ParseDump(p []byte) ([][]byte, string) {
	if len(p) < 10 {
		return nil, "DUMP payload version or checksum are wrong"
	}
	footer := p[len(p)-10:]
	if binary.LittleEndian.Uint16(footer) > rdbVersion || CRC64(p[:len(p)-8]) != binary.LittleEndian.Uint64(footer[2:]) {
		return nil, "DUMP payload version or checksum are wrong"
	}
	r := &rdbReader{b: p}
	var codes [][]byte
	for len(p)-r.pos > 10 {
		t, ok := r.byte()
		switch {
		case !ok:
			return nil, "can not read data type"
		case t == rdbOpcodeFunction:
			// The release candidates' format, which kvorum does not read
			// (what Redis 7.0.15 answers to the one tried).
			return nil, "Failed loading engine name"
		case t != rdbOpcodeFunction2:
			return nil, "given type is not a function"
		}
		code, ok := r.str()
		if !ok {
			return nil, "Failed loading library payload"
		}
		codes = append(codes, code)
	}
	return codes, ""
}

type rdbReader struct {
	b   []byte
	pos int
}

func (r *rdbReader) byte() (byte, bool) {
	if r.pos >= len(r.b) {
		return 0, false
	}
	r.pos++
	return r.b[r.pos-1], true
}

func (r *rdbReader) take(n uint64) ([]byte, bool) {
	if n > uint64(len(r.b)-r.pos) {
		return nil, false
	}
	s := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return s, true
}

// length is rdbLoadLenByRef: a length, or (encoded) a string encoding.
func (r *rdbReader) length() (n uint64, encoded, ok bool) {
	c, ok := r.byte()
	if !ok {
		return 0, false, false
	}
	switch c >> 6 {
	case 0:
		return uint64(c & 0x3f), false, true
	case 1:
		d, ok := r.byte()
		return uint64(c&0x3f)<<8 | uint64(d), false, ok
	case 3:
		return uint64(c & 0x3f), true, true
	}
	switch c {
	case 0x80:
		b, ok := r.take(4)
		if !ok {
			return 0, false, false
		}
		return uint64(binary.BigEndian.Uint32(b)), false, true
	case 0x81:
		b, ok := r.take(8)
		if !ok {
			return 0, false, false
		}
		return binary.BigEndian.Uint64(b), false, true
	}
	return 0, false, false
}

// str is rdbGenericLoadStringObject.
func (r *rdbReader) str() ([]byte, bool) {
	n, encoded, ok := r.length()
	if !ok {
		return nil, false
	}
	if !encoded {
		b, ok := r.take(n)
		return append([]byte(nil), b...), ok
	}
	switch n {
	case 0, 1, 2: // RDB_ENC_INT8, INT16, INT32
		b, ok := r.take(1 << n)
		if !ok {
			return nil, false
		}
		var v int64
		switch n {
		case 0:
			v = int64(int8(b[0]))
		case 1:
			v = int64(int16(binary.LittleEndian.Uint16(b)))
		default:
			v = int64(int32(binary.LittleEndian.Uint32(b)))
		}
		return strconv.AppendInt(nil, v, 10), true
	case 3: // RDB_ENC_LZF
		clen, _, ok := r.length()
		if !ok {
			return nil, false
		}
		ulen, _, ok := r.length()
		if !ok {
			return nil, false
		}
		c, ok := r.take(clen)
		if !ok || ulen == 0 || ulen > 1<<32 {
			return nil, false
		}
		out, ok := lzfDecompress(c, int(ulen))
		return out, ok && len(out) == int(ulen)
	}
	return nil, false
}

// lzfDecompress is liblzf's lzf_decompress into a buffer of n bytes.
func lzfDecompress(in []byte, n int) ([]byte, bool) {
	out := make([]byte, 0, n)
	for i := 0; i < len(in); {
		ctrl := int(in[i])
		i++
		if ctrl < 32 { // literal run of ctrl+1 bytes
			l := ctrl + 1
			if len(out)+l > n || i+l > len(in) {
				return nil, false
			}
			out = append(out, in[i:i+l]...)
			i += l
			continue
		}
		l := ctrl >> 5
		ref := len(out) - (ctrl&0x1f)<<8 - 1
		if l == 7 {
			if i >= len(in) {
				return nil, false
			}
			l += int(in[i])
			i++
		}
		if i >= len(in) {
			return nil, false
		}
		ref -= int(in[i])
		i++
		l += 2
		if len(out)+l > n || ref < 0 {
			return nil, false
		}
		for j := 0; j < l; j++ {
			out = append(out, out[ref+j])
		}
	}
	return out, true
}

// Restored is a library of a FUNCTION RESTORE payload, loaded.
type Restored struct {
	Name  string
	Code  []byte
	Funcs []Function
}

// RestoreLibraries parses and loads the libraries of a FUNCTION RESTORE
// payload, with Redis's checks that depend on the payload alone, in its
// order: version and checksum, format, then for each library its
// metadata, a name already in the payload, its load, and a function
// already registered by an earlier library of the payload. On failure it
// returns Redis's error reply.
func RestoreLibraries(payload []byte) ([]Restored, reply.Reply) {
	codes, msg := ParseDump(payload)
	if msg != "" {
		return nil, reply.Error("ERR " + msg)
	}
	out := make([]Restored, 0, len(codes))
	funcs := map[string]bool{}
	for _, code := range codes {
		lib, r := ParseLibrary(code)
		if lib == nil {
			return nil, r
		}
		for _, o := range out {
			if o.Name == lib.Name {
				return nil, reply.ErrorText([]byte("ERR Library '" + cString(lib.Name) + "' already exists"))
			}
		}
		fs, r, ok := lib.Load()
		if !ok {
			return nil, r
		}
		for _, f := range fs {
			if funcs[strings.ToLower(f.Name)] {
				return nil, reply.ErrorText([]byte("ERR Function " + cString(f.Name) + " already exists"))
			}
		}
		for _, f := range fs {
			funcs[strings.ToLower(f.Name)] = true
		}
		out = append(out, Restored{Name: lib.Name, Code: code, Funcs: fs})
	}
	return out, reply.Reply{}
}
