package rdb

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math/rand"
	"testing"
	"time"
)

func TestCRC64Vector(t *testing.T) {
	if got := crc64Update(0, []byte("123456789")); got != 0xe9c6d914c4b8d9ca {
		t.Fatalf("crc64(123456789) = %x, want e9c6d914c4b8d9ca", got)
	}
	// Incremental updates give the same result.
	if got := crc64Update(crc64Update(0, []byte("1234")), []byte("56789")); got != 0xe9c6d914c4b8d9ca {
		t.Fatalf("incremental crc64 = %x", got)
	}
}

func TestLZFRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	inputs := [][]byte{
		bytes.Repeat([]byte("a"), 100),
		bytes.Repeat([]byte("abcdefgh"), 1000),
		[]byte("hello hello hello hello hello world world world"),
	}
	for i := 0; i < 200; i++ {
		n := 21 + rng.Intn(20000)
		b := make([]byte, n)
		alpha := 1 + rng.Intn(8)
		for j := range b {
			b[j] = byte('a' + rng.Intn(alpha))
		}
		inputs = append(inputs, b)
	}
	for _, in := range inputs {
		c := lzfCompress(in, len(in)-4)
		if c == nil {
			continue
		}
		out, ok := lzfDecompress(c, len(in))
		if !ok || !bytes.Equal(out, in) {
			t.Fatalf("round trip of %d bytes failed", len(in))
		}
	}
	// Incompressible data does not fit.
	b := make([]byte, 1000)
	rng.Read(b)
	if c := lzfCompress(b, len(b)-4); c != nil {
		t.Fatalf("random data compressed to %d bytes", len(c))
	}
	if _, ok := lzfDecompress([]byte{0xe0, 0xff, 0x00}, 100); ok {
		t.Fatal("back reference before the start accepted")
	}
}

func TestListpackKnownBytes(t *testing.T) {
	var b lpBuilder
	for _, s := range []string{"a", "1", "-1", "127", "128", "4095", "-4096", "32767", "8388607", "2147483647", "9223372036854775807", "007", ""} {
		b.appendString([]byte(s))
	}
	want := "" +
		"3a000000" + "0d00" + // total bytes 58, 13 elements
		"8161" + "02" + // "a": 6-bit string
		"01" + "01" + // 1: 7-bit uint
		"dfff" + "02" + // -1: 13-bit int
		"7f" + "01" + // 127
		"c080" + "02" + // 128: 13-bit
		"cfff" + "02" + // 4095
		"d000" + "02" + // -4096
		"f1ff7f" + "03" + // 32767: 16-bit
		"f2ffff7f" + "04" + // 8388607: 24-bit
		"f3ffffff7f" + "05" + // 2147483647: 32-bit
		"f4ffffffffffffff7f" + "09" + // int64 max
		"83303037" + "04" + // "007" stays a string
		"80" + "01" + // ""
		"ff"
	if got := hex.EncodeToString(b.bytes()); got != want {
		t.Fatalf("listpack\n got %s\nwant %s", got, want)
	}
	vals, err := lpParse(b.bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(vals) != 13 || string(vals[4].bytes()) != "128" || string(vals[6].bytes()) != "-4096" || string(vals[11].bytes()) != "007" {
		t.Fatalf("parsed %v", vals)
	}
	// A long string: 12-bit length and a 2-byte backlen.
	var l lpBuilder
	l.appendString(bytes.Repeat([]byte("x"), 200))
	got := l.bytes()
	if hex.EncodeToString(got[6:8]) != "e0c8" || hex.EncodeToString(got[len(got)-3:]) != "01caff" {
		t.Fatalf("long string entry: %x ... %x", got[6:8], got[len(got)-3:])
	}
	// Corruptions are refused.
	bad := b.bytes()
	bad[len(bad)-2] = 7 // wrong backlen
	if _, err := lpParse(bad); err == nil {
		t.Fatal("bad backlen accepted")
	}
}

func TestIntsetKnownBytes(t *testing.T) {
	cases := []struct {
		in   []int64
		want string
	}{
		{[]int64{3, 1, 2}, "02000000" + "03000000" + "0100" + "0200" + "0300"},
		{[]int64{70000, -1}, "04000000" + "02000000" + "ffffffff" + "70110100"},
		{[]int64{1 << 40}, "08000000" + "01000000" + "0000000000010000"},
	}
	for _, c := range cases {
		got := intsetBuild(c.in)
		if hex.EncodeToString(got) != c.want {
			t.Errorf("intset %v = %x, want %s", c.in, got, c.want)
		}
		vals, err := intsetParse(got)
		if err != nil || len(vals) != len(c.in) {
			t.Errorf("parse %x: %v %v", got, vals, err)
		}
	}
}

func TestStringEncodings(t *testing.T) {
	cases := map[string]string{
		"0":           "00c000",
		"-1":          "00c0ff",
		"123":         "00c07b",
		"-129":        "00c17fff",
		"40000":       "00c2409c0000",
		"12345678901": "000b3132333435363738393031",
		"007":         "0003303037",
		"":            "0000",
	}
	for in, want := range cases {
		p, err := EncodeDump(&Value{Kind: KindString, String: []byte(in)}, EncodeOptions{Compress: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(p[:len(p)-10]); got != want {
			t.Errorf("%q: %s, want %s", in, got, want)
		}
		v, err := DecodeDump(p)
		if err != nil || string(v.String) != in {
			t.Errorf("%q: decoded %v, %v", in, v, err)
		}
	}
}

func TestHugeLengthFailsFast(t *testing.T) {
	// A list of 2^60 elements, then a set, a hash and a string of 2^60
	// bytes.
	for _, obj := range [][]byte{
		{typeList, 0x81, 0x10, 0, 0, 0, 0, 0, 0, 0},
		{typeSet, 0x81, 0x10, 0, 0, 0, 0, 0, 0, 0},
		{typeHash, 0x81, 0x10, 0, 0, 0, 0, 0, 0, 0},
		{typeZSet2, 0x81, 0x10, 0, 0, 0, 0, 0, 0, 0},
		{typeString, 0x81, 0x10, 0, 0, 0, 0, 0, 0, 0},
		{typeListQuicklist2, 0x81, 0x10, 0, 0, 0, 0, 0, 0, 0},
		{typeStreamListpacks2, 0x81, 0x10, 0, 0, 0, 0, 0, 0, 0},
		{typeString, 0xC3, 0x01, 0x81, 0x10, 0, 0, 0, 0, 0, 0, 0, 0},
	} {
		start := time.Now()
		_, err := DecodeDump(withFooter(obj))
		if !errors.Is(err, ErrFormat) {
			t.Errorf("%x: %v, want ErrFormat", obj, err)
		}
		if time.Since(start) > 100*time.Millisecond {
			t.Errorf("%x took %v", obj, time.Since(start))
		}
	}
}

// withFooter appends the version and checksum to an object.
func withFooter(obj []byte) []byte {
	p := append(append([]byte(nil), obj...), Version, 0)
	c := crc64Update(0, p)
	for i := 0; i < 8; i++ {
		p = append(p, byte(c>>(8*i)))
	}
	return p
}

func TestPayloadFooter(t *testing.T) {
	p, _ := EncodeDump(&Value{Kind: KindString, String: []byte("hello")}, EncodeOptions{})
	for i := 0; i < len(p); i++ {
		if _, err := DecodeDump(p[:i]); err == nil {
			t.Fatalf("truncated to %d bytes: no error", i)
		}
	}
	for i := range p {
		q := bytes.Clone(p)
		q[i] ^= 0x40
		if _, err := DecodeDump(q); !errors.Is(err, ErrPayload) {
			t.Fatalf("byte %d flipped: %v, want ErrPayload", i, err)
		}
	}
	v := bytes.Clone(p)
	v[len(v)-10] = 13
	if _, err := DecodeDump(withFooterVersion(p[:len(p)-10], 13)); !errors.Is(err, ErrPayload) {
		t.Fatalf("version 13: %v", err)
	}
	if _, err := DecodeDump(withFooterVersion(append(bytes.Clone(p[:len(p)-10]), 0), 10)); !errors.Is(err, ErrFormat) {
		t.Fatalf("trailing byte: %v", err)
	}
}

func withFooterVersion(obj []byte, ver byte) []byte {
	p := append(append([]byte(nil), obj...), ver, 0)
	c := crc64Update(0, p)
	for i := 0; i < 8; i++ {
		p = append(p, byte(c>>(8*i)))
	}
	return p
}
