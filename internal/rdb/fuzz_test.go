package rdb

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"
)

// seedValues are values of every kind and encoding, built without Redis.
func seedValues() []*Value {
	bs := func(ss ...string) [][]byte {
		out := make([][]byte, len(ss))
		for i, s := range ss {
			out[i] = []byte(s)
		}
		return out
	}
	var longList [][]byte
	for i := 0; i < 1500; i++ {
		longList = append(longList, []byte(fmt.Sprintf("item-%d", i)))
	}
	var bigHash []Field
	for i := 0; i < 200; i++ {
		bigHash = append(bigHash, Field{[]byte(fmt.Sprintf("f%d", i)), []byte(fmt.Sprint(i))})
	}
	var bigZ []ZMember
	for i := 0; i < 200; i++ {
		bigZ = append(bigZ, ZMember{[]byte(fmt.Sprintf("m%d", i)), float64(i) / 3})
	}
	stream := &Stream{
		Entries: []StreamEntry{
			{StreamID{1, 1}, bs("a", "1", "b", "2")},
			{StreamID{1, 2}, bs("a", "3", "b", "4")},
			{StreamID{2, 0}, bs("c", "x")},
		},
		LastID: StreamID{3, 0}, FirstID: StreamID{1, 1}, MaxDeletedID: StreamID{3, 0}, EntriesAdded: 4,
		Groups: []StreamGroup{{
			Name: []byte("g"), LastID: StreamID{1, 2}, EntriesRead: 2,
			Pending: []PendingEntry{
				{StreamID{1, 1}, []byte("alice"), 1700000000000, 1},
				{StreamID{1, 2}, []byte("bob"), 1700000000001, 3},
			},
			Consumers: []Consumer{{[]byte("alice"), 1700000000000}, {[]byte("bob"), 1700000000002}, {[]byte("carol"), 5}},
		}, {Name: []byte("empty"), EntriesRead: -1}},
	}
	return []*Value{
		{Kind: KindString, String: []byte("hello")},
		{Kind: KindString, String: []byte("-123")},
		{Kind: KindString, String: bytes.Repeat([]byte("compress me "), 20)},
		{Kind: KindList, List: bs("a", "1", "-5000", "", "007")},
		{Kind: KindList, List: longList},
		{Kind: KindSet, Set: bs("1", "2", "70000")},
		{Kind: KindSet, Set: bs("x", "y")},
		{Kind: KindHash, Hash: []Field{{[]byte("f"), []byte("v")}, {[]byte("n"), []byte("12")}}},
		{Kind: KindHash, Hash: bigHash},
		{Kind: KindZSet, ZSet: []ZMember{{[]byte("a"), 1}, {[]byte("b"), 0.1}, {[]byte("c"), math.Inf(-1)}, {[]byte("d"), 1e300}}},
		{Kind: KindZSet, ZSet: bigZ},
		{Kind: KindStream, Stream: stream},
	}
}

func seedPayloads(t testing.TB) [][]byte {
	var out [][]byte
	for _, v := range seedValues() {
		for _, c := range []bool{false, true} {
			p, err := EncodeDump(v, EncodeOptions{Compress: c})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, p)
		}
	}
	return out
}

// checkRoundTrip: when p decodes, its re-encoding decodes to an equal value.
func checkRoundTrip(t testing.TB, p []byte) {
	v, err := DecodeDump(p)
	if err != nil {
		if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrPayload) {
			t.Fatalf("error wraps neither ErrFormat nor ErrPayload: %v", err)
		}
		return
	}
	enc, err := EncodeDump(v, EncodeOptions{Compress: true})
	if err != nil {
		t.Fatalf("EncodeDump of a decoded value: %v", err)
	}
	back, err := DecodeDump(enc)
	if err != nil {
		t.Fatalf("DecodeDump(EncodeDump(v)): %v", err)
	}
	if d := diffValues(v, back); d != "" {
		t.Fatalf("round trip differs:\n%s", d)
	}
}

func TestSeedRoundTrip(t *testing.T) {
	for i, v := range seedValues() {
		p, err := EncodeDump(v, EncodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeDump(p)
		if err != nil {
			t.Fatalf("seed %d: %v", i, err)
		}
		if d := diffValues(got, v); d != "" {
			t.Fatalf("seed %d:\n%s", i, d)
		}
	}
}

func TestBadPayloads(t *testing.T) {
	for _, p := range seedPayloads(t) {
		// Every truncation fails.
		for n := 0; n < len(p); n++ {
			if _, err := DecodeDump(p[:n]); err == nil {
				t.Fatalf("payload %x truncated to %d: no error", p[:min(len(p), 20)], n)
			}
		}
		// Every flipped byte is a checksum error.
		for i := range p {
			q := bytes.Clone(p)
			q[i] ^= 0x21
			if _, err := DecodeDump(q); !errors.Is(err, ErrPayload) {
				t.Fatalf("byte %d flipped: %v", i, err)
			}
		}
		// Corrupt bodies with a valid footer: no panic, and a consistent
		// result when they decode (every byte of small payloads, a sample
		// of the others).
		body := p[:len(p)-10]
		step := 1 + len(body)/300
		for i := 0; i < len(body); i += step {
			for _, x := range []byte{0x01, 0x80, 0xff} {
				q := bytes.Clone(body)
				q[i] ^= x
				checkRoundTrip(t, withFooter(q))
			}
			checkRoundTrip(t, withFooter(body[:i]))
		}
	}
}

func FuzzDecodeDump(f *testing.F) {
	for _, p := range seedPayloads(f) {
		f.Add(p)
	}
	for _, c := range legacyCases() {
		f.Add(withFooter(c.obj))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		// Give mutated bodies a valid footer half of the time, so that the
		// fuzzer gets past the checksum.
		checkRoundTrip(t, p)
		if len(p) > 0 && p[0]&1 == 0 {
			checkRoundTrip(t, withFooter(p[1:]))
		}
	})
}

func FuzzReader(f *testing.F) {
	f.Add([]byte("REDIS0010\xfe\x00\xfb\x01\x00\x00\x01k\x01v\xff\x00\x00\x00\x00\x00\x00\x00\x00"))
	for _, p := range seedPayloads(f) {
		file := append([]byte("REDIS0010\xfa\x05redis\x057.0.0\xfe\x00\xfc\x00\x01\x02\x03\x04\x05\x06\x07"), p[0])
		file = append(file, 1, 'k')
		file = append(file, p[1:len(p)-10]...)
		file = append(file, 0xff)
		c := crc64Update(0, file)
		for i := 0; i < 8; i++ {
			file = append(file, byte(c>>(8*i)))
		}
		f.Add(file)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data))
		if err != nil {
			return
		}
		for i := 0; i < 1000; i++ {
			e, err := r.Next()
			if err != nil {
				return
			}
			if e.Value == nil || r.Offset() > int64(len(data)) {
				t.Fatalf("entry %v, offset %d", e, r.Offset())
			}
		}
	})
}
