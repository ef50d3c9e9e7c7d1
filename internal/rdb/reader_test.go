package rdb

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// rdbFile builds an RDB file: header, body, and (version >= 5) the EOF
// opcode with the checksum.
func rdbFile(version string, body ...[]byte) []byte {
	f := []byte("REDIS" + version)
	for _, b := range body {
		f = append(f, b...)
	}
	f = append(f, opEOF)
	if version >= "0005" {
		c := crc64Update(0, f)
		for i := 0; i < 8; i++ {
			f = append(f, byte(c>>(8*i)))
		}
	}
	return f
}

func TestReaderOpcodes(t *testing.T) {
	str := func(s string) []byte {
		e := &encoder{}
		e.str([]byte(s))
		return e.buf
	}
	file := rdbFile("0009",
		[]byte{opAux}, str("redis-ver"), str("7.0.15"),
		[]byte{opSelectDB, 3, opResizeDB, 2, 1},
		[]byte{opFunction2}, str("#!lua name=x\n..."),
		[]byte{opExpireTime, 0x10, 0, 0, 0}, // 16 s
		[]byte{opIdle, 0x40, 0xC8},          // 200
		[]byte{typeString}, str("a"), str("1"),
		[]byte{opFreq, 7},
		[]byte{opExpireTimeMs, 1, 2, 0, 0, 0, 0, 0, 0},
		[]byte{typeSetIntset}, str("s"), str(string(intsetBuild([]int64{5, 1}))),
		[]byte{opSlotInfo, 1, 2, 3},
		[]byte{opSelectDB, 0},
		[]byte{typeString}, str("plain"), str("v"),
	)
	entries, r, err := readAll(file)
	if err != nil {
		t.Fatal(err)
	}
	if r.Version() != 9 || r.SkippedFunctions() != 1 || r.Offset() != int64(len(file)) {
		t.Fatalf("version %d, functions %d, offset %d of %d", r.Version(), r.SkippedFunctions(), r.Offset(), len(file))
	}
	if len(entries) != 3 {
		t.Fatalf("%d entries", len(entries))
	}
	a, s, p := entries[0], entries[1], entries[2]
	if a.DB != 3 || string(a.Key) != "a" || string(a.Value.String) != "1" || a.ExpireMs != 16000 || a.Idle != 200 || a.Freq != -1 {
		t.Errorf("a: %+v", a)
	}
	if s.DB != 3 || s.ExpireMs != 0x0201 || s.Freq != 7 || s.Idle != -1 || len(s.Value.Set) != 2 || string(s.Value.Set[0]) != "1" {
		t.Errorf("s: %+v %q", s, s.Value.Set)
	}
	if p.DB != 0 || p.ExpireMs != 0 || p.Idle != -1 || p.Freq != -1 {
		t.Errorf("plain: %+v", p)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("after the end: %v", err)
	}

	// A version 4 file has no checksum.
	old := rdbFile("0004", []byte{opSelectDB, 0, typeString}, str("k"), str("v"))
	if entries, _, err := readAll(old); err != nil || len(entries) != 1 {
		t.Errorf("version 4: %v %v", entries, err)
	}
	for _, c := range []struct {
		body []byte
		want string
	}{
		{[]byte{opModuleAux, 1}, "module auxiliary"},
		{[]byte{opFunctionPre, 1}, "opcode 246"},
		{append([]byte{typeModule2}, str("m")...), "module type 7 not supported"},
		{append([]byte{25}, str("h")...), "RDB type 25"},
	} {
		_, _, err := readAll(rdbFile("0010", c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrFormat) {
			t.Errorf("%x: %v, want %q", c.body, err, c.want)
		}
	}
	// Checksum mismatch.
	bad := bytes.Clone(file)
	bad[len(bad)-3] ^= 1
	if _, _, err := readAll(bad); err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Errorf("bad checksum: %v", err)
	}
	// Truncations.
	for n := 9; n < len(file); n++ {
		_, _, err := readAll(file[:n])
		if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "truncated") {
			t.Fatalf("truncated at %d: %v", n, err)
		}
	}
	// A huge string length in a file fails without allocating it.
	huge := rdbFile("0010", []byte{typeString, 1, 'k', 0x81, 0x10, 0, 0, 0, 0, 0, 0, 0})
	if _, _, err := readAll(huge[:len(huge)-9]); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("huge length: %v", err)
	}
}
