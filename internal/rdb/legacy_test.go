package rdb

import (
	"context"
	"encoding/binary"
	"math"
	"strconv"
	"testing"
)

// zlBuild builds a ziplist (ziplist.c's format) of elems, using every
// integer encoding.
func zlBuild(elems []string) []byte {
	var body []byte
	prevlen := 0
	tail := 10
	for _, s := range elems {
		start := len(body)
		tail = 10 + start
		if prevlen < 254 {
			body = append(body, byte(prevlen))
		} else {
			body = append(body, 254)
			body = binary.LittleEndian.AppendUint32(body, uint32(prevlen))
		}
		if v, ok := lpStringToInt64([]byte(s)); ok {
			switch {
			case v >= 0 && v <= 12:
				body = append(body, 0xF1+byte(v))
			case v >= math.MinInt8 && v <= math.MaxInt8:
				body = append(body, 0xFE, byte(v))
			case v >= math.MinInt16 && v <= math.MaxInt16:
				body = append(body, 0xC0)
				body = binary.LittleEndian.AppendUint16(body, uint16(v))
			case v >= -(1<<23) && v < 1<<23:
				body = append(body, 0xF0, byte(v), byte(v>>8), byte(v>>16))
			case v >= math.MinInt32 && v <= math.MaxInt32:
				body = append(body, 0xD0)
				body = binary.LittleEndian.AppendUint32(body, uint32(v))
			default:
				body = append(body, 0xE0)
				body = binary.LittleEndian.AppendUint64(body, uint64(v))
			}
		} else {
			switch l := len(s); {
			case l < 64:
				body = append(body, byte(l))
			case l < 16384:
				body = append(body, 0x40|byte(l>>8), byte(l))
			default:
				body = append(body, 0x80)
				body = binary.BigEndian.AppendUint32(body, uint32(l))
			}
			body = append(body, s...)
		}
		prevlen = len(body) - start
	}
	out := make([]byte, 10, 11+len(body))
	binary.LittleEndian.PutUint32(out, uint32(11+len(body)))
	binary.LittleEndian.PutUint32(out[4:], uint32(tail))
	binary.LittleEndian.PutUint16(out[8:], uint16(min(len(elems), 65535)))
	out = append(out, body...)
	return append(out, 0xFF)
}

// zipmapBuild builds a zipmap of pairs.
func zipmapBuild(pairs []string) []byte {
	out := []byte{byte(len(pairs) / 2)}
	putLen := func(l int) {
		if l < 254 {
			out = append(out, byte(l))
		} else {
			out = append(out, 254)
			out = binary.LittleEndian.AppendUint32(out, uint32(l))
		}
	}
	for i := 0; i < len(pairs); i += 2 {
		putLen(len(pairs[i]))
		out = append(out, pairs[i]...)
		putLen(len(pairs[i+1]))
		out = append(out, 2) // two free bytes
		out = append(out, pairs[i+1]...)
		out = append(out, 0, 0)
	}
	return append(out, 0xFF)
}

type legacyCase struct {
	name    string
	obj     []byte
	want    *Value
	restore bool // redis-server 7.0 can RESTORE it
}

func legacyCases() []legacyCase {
	str := func(s string) []byte {
		e := &encoder{}
		e.str([]byte(s))
		return e.buf
	}
	raw := func(s []byte) []byte {
		e := &encoder{}
		e.len(uint64(len(s)))
		return append(e.buf, s...)
	}
	cat := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	lenb := func(n uint64) []byte {
		e := &encoder{}
		e.len(n)
		return e.buf
	}
	elems := []string{"a", "0", "12", "13", "-1", "127", "-128", "300", "-30000", "8000000", "-8000000", "100000000", "-3000000000", "9223372036854775807", string(make([]byte, 100)), string(make([]byte, 20000)), "007", ""}
	bs := func(ss ...string) [][]byte {
		out := make([][]byte, len(ss))
		for i, s := range ss {
			out[i] = []byte(s)
		}
		return out
	}
	hashPairs := []string{"f1", "v1", "n", "12345", "big", string(make([]byte, 300)), "", "empty"}
	var fields []Field
	for i := 0; i < len(hashPairs); i += 2 {
		fields = append(fields, Field{[]byte(hashPairs[i]), []byte(hashPairs[i+1])})
	}
	asciiDouble := func(f float64) []byte {
		if math.IsInf(f, 1) {
			return []byte{254}
		}
		if math.IsInf(f, -1) {
			return []byte{255}
		}
		s := strconv.FormatFloat(f, 'g', 17, 64)
		return append([]byte{byte(len(s))}, s...)
	}
	zs := []ZMember{{[]byte("a"), 1}, {[]byte("b"), -0.5}, {[]byte("c"), math.Inf(1)}, {[]byte("d"), math.Inf(-1)}, {[]byte("e"), 1e300}}
	var zsetOld, zsetZl []byte
	var zlElems []string
	zsetOld = lenb(uint64(len(zs)))
	for _, z := range zs {
		zsetOld = cat(zsetOld, str(string(z.Member)), asciiDouble(z.Score))
		zlElems = append(zlElems, string(z.Member), d2string(z.Score))
	}
	zsetZl = raw(zlBuild(zlElems))
	var quick []byte
	quick = lenb(3)
	quick = cat(quick, raw(zlBuild(elems[:5])), raw(zlBuild(elems[5:10])), raw(zlBuild(elems[10:])))
	var oldList []byte
	oldList = lenb(uint64(len(elems)))
	for _, s := range elems {
		oldList = cat(oldList, str(s))
	}
	var lpSet lpBuilder
	for _, s := range []string{"x", "1", "-7", "hello"} {
		lpSet.appendString([]byte(s))
	}
	// A stream of type 15: the v2 encoding without the v2 fields.
	node := &streamNode{master: StreamID{5, 7}, masterFields: [][]byte{[]byte("a")}, count: 1}
	node.entries.appendInt(streamFlagSameFields)
	node.entries.appendInt(0)
	node.entries.appendInt(0)
	node.entries.appendString([]byte("1"))
	node.entries.appendInt(4)
	stream1 := cat(lenb(1), str(string(rawID(StreamID{5, 7}))), raw(node.bytes()), lenb(1), lenb(5), lenb(7), lenb(1),
		str("g"), lenb(5), lenb(7), lenb(1), []byte{0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 7}, []byte{10, 0, 0, 0, 0, 0, 0, 0}, lenb(2),
		lenb(1), str("c"), []byte{20, 0, 0, 0, 0, 0, 0, 0}, lenb(1), []byte{0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 7})
	// Type 21: a consumer with an active time.
	stream3 := cat(lenb(0), lenb(0), lenb(5), lenb(7), lenb(0), lenb(0), lenb(0), lenb(0), lenb(3),
		lenb(1), str("g"), lenb(5), lenb(7), lenb(0),
		lenb(1), []byte{0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 7}, []byte{10, 0, 0, 0, 0, 0, 0, 0}, lenb(2),
		lenb(1), str("c"), []byte{20, 0, 0, 0, 0, 0, 0, 0}, []byte{30, 0, 0, 0, 0, 0, 0, 0},
		lenb(1), []byte{0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 7})
	return []legacyCase{
		{"list ziplist", cat([]byte{typeListZiplist}, raw(zlBuild(elems))), &Value{Kind: KindList, List: bs(elems...)}, true},
		{"list quicklist ziplists", cat([]byte{typeListQuicklist}, quick), &Value{Kind: KindList, List: bs(elems...)}, true},
		{"list linked list", cat([]byte{typeList}, oldList), &Value{Kind: KindList, List: bs(elems...)}, true},
		{"hash ziplist", cat([]byte{typeHashZiplist}, raw(zlBuild(hashPairs))), &Value{Kind: KindHash, Hash: fields}, true},
		{"hash zipmap", cat([]byte{typeHashZipmap}, raw(zipmapBuild(hashPairs))), &Value{Kind: KindHash, Hash: fields}, true},
		{"zset ascii doubles", cat([]byte{typeZSet}, zsetOld), &Value{Kind: KindZSet, ZSet: zs}, true},
		{"zset ziplist", cat([]byte{typeZSetZiplist}, zsetZl), &Value{Kind: KindZSet, ZSet: zs}, true},
		{"set listpack", cat([]byte{typeSetListpack}, raw(lpSet.bytes())), &Value{Kind: KindSet, Set: bs("x", "1", "-7", "hello")}, false},
		{"stream v1", cat([]byte{typeStreamListpacks}, stream1), &Value{Kind: KindStream, Stream: &Stream{LastID: StreamID{5, 7}, FirstID: StreamID{5, 7}, EntriesAdded: 1,
			Entries: []StreamEntry{{ID: StreamID{5, 7}, Fields: bs("a", "1")}},
			Groups: []StreamGroup{{Name: []byte("g"), LastID: StreamID{5, 7}, EntriesRead: 1,
				Pending:   []PendingEntry{{ID: StreamID{5, 7}, Consumer: []byte("c"), DeliveryMs: 10, DeliveryCount: 2}},
				Consumers: []Consumer{{Name: []byte("c"), SeenMs: 20}}}}}}, true},
		{"stream v3", cat([]byte{typeStreamListpacks3}, stream3), &Value{Kind: KindStream, Stream: &Stream{LastID: StreamID{5, 7}, EntriesAdded: 3,
			Groups: []StreamGroup{{Name: []byte("g"), LastID: StreamID{5, 7}, EntriesRead: 0,
				Pending:   []PendingEntry{{ID: StreamID{5, 7}, Consumer: []byte("c"), DeliveryMs: 10, DeliveryCount: 2}},
				Consumers: []Consumer{{Name: []byte("c"), SeenMs: 20}}}}}}, false},
	}
}

func TestLegacyEncodings(t *testing.T) {
	cases := legacyCases()
	for _, tc := range cases {
		got, err := DecodeDump(withFooter(tc.obj))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if d := diffValues(got, tc.want); d != "" {
			t.Errorf("%s:\n%s", tc.name, d)
		}
		// Our re-encoding decodes to the same.
		enc, err := EncodeDump(got, EncodeOptions{Compress: true})
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeDump(enc)
		if err != nil || diffValues(back, tc.want) != "" {
			t.Errorf("%s: re-encoding: %v %s", tc.name, err, diffValues(back, tc.want))
		}
	}
	// Redis 7.0 restores the same values from the legacy payloads.
	c, _ := startRedis(t)
	ctx := context.Background()
	for _, tc := range cases {
		if !tc.restore {
			continue
		}
		if err := c.Do(ctx, "RESTORE", "old", 0, string(withFooter(tc.obj)), "REPLACE").Err(); err != nil {
			t.Errorf("%s: RESTORE: %v", tc.name, err)
			continue
		}
		v, err := fetchValue(ctx, c, "old")
		if err != nil {
			t.Fatal(err)
		}
		if d := diffValues(v, tc.want); d != "" {
			t.Errorf("%s: Redis has\n%s", tc.name, d)
		}
	}
}

func TestUnsupportedTypes(t *testing.T) {
	for typ, want := range map[byte]string{6: "module type 6 not supported", 7: "module type 7 not supported", 24: "RDB type 24", 30: "unknown object type 30"} {
		_, err := DecodeDump(withFooter([]byte{typ, 0}))
		if err == nil || !containsStr(err.Error(), want) {
			t.Errorf("type %d: %v", typ, err)
		}
	}
}

func containsStr(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
