package kv

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/rdb"
)

// fakeCodec replaces package rdb's payloads with gob and a CRC32 footer
// for the test, so that the conversions between kvorum's records and
// rdb.Value are tested whatever the state of the rdb package (the real
// format is tested by testdata/diff/dump.txt and, against redis-server,
// by internal/server's TestDumpRestoreWithRedis).
func fakeCodec(t *testing.T) {
	t.Helper()
	enc, dec := encodeDump, decodeDump
	t.Cleanup(func() { encodeDump, decodeDump = enc, dec })
	encodeDump = func(v *rdb.Value, _ rdb.EncodeOptions) ([]byte, error) {
		var b bytes.Buffer
		if err := gob.NewEncoder(&b).Encode(v); err != nil {
			return nil, err
		}
		return binary.BigEndian.AppendUint32(b.Bytes(), crc32.ChecksumIEEE(b.Bytes())), nil
	}
	decodeDump = func(p []byte) (*rdb.Value, error) {
		if len(p) < 4 || crc32.ChecksumIEEE(p[:len(p)-4]) != binary.BigEndian.Uint32(p[len(p)-4:]) {
			return nil, fmt.Errorf("fake: %w", rdb.ErrPayload)
		}
		var v rdb.Value
		if err := gob.NewDecoder(bytes.NewReader(p[:len(p)-4])).Decode(&v); err != nil {
			return nil, fmt.Errorf("fake: %w: %v", rdb.ErrFormat, err)
		}
		return &v, nil
	}
}

// dumpOf DUMPs key k and fails if that is not a payload.
func (l *lockLog) dumpOf(k string) string {
	l.t.Helper()
	r := l.do("DUMP", k)
	if r.Kind != 0 && r.IsError() || r.Str == nil {
		l.t.Fatalf("DUMP %s = %s", k, show(r))
	}
	return string(r.Str)
}

// readBack is what the reading commands of k's type answer, key name
// left out, to compare a restored key with its original.
func (l *lockLog) readBack(k string) string {
	l.t.Helper()
	typ := show(l.do("TYPE", k))
	var cmds [][]string
	switch typ {
	case "string":
		cmds = [][]string{{"GET", k}}
	case "list":
		cmds = [][]string{{"LRANGE", k, "0", "-1"}}
	case "set":
		cmds = [][]string{{"SORT", k, "ALPHA"}, {"SCARD", k}}
	case "hash":
		cmds = [][]string{{"HGETALL", k}, {"HLEN", k}}
	case "zset":
		cmds = [][]string{{"ZRANGE", k, "0", "-1", "WITHSCORES"}, {"ZCARD", k}}
	case "stream":
		cmds = [][]string{{"XINFO", "STREAM", k, "FULL"}, {"XLEN", k}}
	}
	out := []string{typ, show(l.do("OBJECT", "ENCODING", k))}
	for _, c := range cmds {
		out = append(out, show(l.do(c...)))
	}
	return strings.Join(out, "\n")
}

// Every type survives DUMP and RESTORE under another key: same contents,
// same encoding, streams with their groups, pending entries and consumers.
func TestDumpRestoreEveryType(t *testing.T) {
	fakeCodec(t)
	l := newLockLog(t)
	l.noLimits = true
	l.want("OK", "SET", "str", "hello")
	l.want("OK", "SET", "int", "12345")
	l.want("1", "PFADD", "hll", "a")
	l.want("0", "SETBIT", "bits", "100", "1")
	l.want("3", "RPUSH", "list", "a", "b", "c")
	l.want("3", "SADD", "intset", "3", "1", "2")
	l.want("2", "SADD", "set", "x", "y")
	l.want("2", "HSET", "hash", "f", "v", "g", "w")
	l.want("2", "ZADD", "zset", "1.5", "a", "-2", "b")
	big := []string{"HSET", "bighash"}
	bigSet := []string{"SADD", "bigset"}
	bigZ := []string{"ZADD", "bigzset"}
	bigL := []string{"RPUSH", "biglist"}
	for i := 0; i < 600; i++ {
		big = append(big, "f"+strconv.Itoa(i), strconv.Itoa(i))
		bigSet = append(bigSet, strconv.Itoa(i))
		bigZ = append(bigZ, strconv.Itoa(i%7), "m"+strconv.Itoa(i))
		bigL = append(bigL, strconv.Itoa(i))
	}
	l.want("600", big...)
	l.want("600", bigSet...)
	l.want("600", bigZ...)
	l.want("600", bigL...)
	l.want("1", "HSET", "longhash", "f", strings.Repeat("v", 100))
	l.want("1-1", "XADD", "stream", "1-1", "a", "1")
	l.want("2-1", "XADD", "stream", "2-1", "b", "2", "c", "3")
	l.want("3-1", "XADD", "stream", "3-1", "a", "4")
	l.want("1", "XDEL", "stream", "2-1")
	l.want("OK", "XGROUP", "CREATE", "stream", "g1", "0")
	l.want("OK", "XGROUP", "CREATE", "stream", "g2", "$")
	l.want("1", "XGROUP", "CREATECONSUMER", "stream", "g2", "idle")
	l.do("XREADGROUP", "GROUP", "g1", "alice", "STREAMS", "stream", ">")
	l.want("[[1-1 [a 1]]]", "XCLAIM", "stream", "g1", "bob", "0", "1-1")
	l.want("[2 1-1 3-1 [[alice 1] [bob 1]]]", "XPENDING", "stream", "g1")
	l.want("OK", "XGROUP", "CREATE", "empty", "g", "$", "MKSTREAM")

	for _, k := range []string{"str", "int", "hll", "bits", "list", "intset", "set", "hash", "zset",
		"bighash", "bigset", "bigzset", "biglist", "longhash", "stream", "empty"} {
		p := l.dumpOf(k)
		l.want("OK", "RESTORE", k+"-copy", "0", p)
		if got, want := l.readBack(k+"-copy"), l.readBack(k); got != want {
			t.Errorf("%s restored:\n%s\nwant:\n%s", k, got, want)
		}
		l.want("-1", "TTL", k+"-copy")
		// XPENDING, extended form: the same owners, counts and times.
		if k == "stream" {
			for _, g := range []string{"g1", "g2"} {
				got := show(l.do("XPENDING", k+"-copy", g, "-", "+", "10"))
				if want := show(l.do("XPENDING", k, g, "-", "+", "10")); got != want {
					t.Errorf("XPENDING %s: %s, want %s", g, got, want)
				}
			}
		}
	}
}

func TestDumpMissingKeyIsNil(t *testing.T) {
	fakeCodec(t)
	l := newLockLog(t)
	l.want("(nil)", "DUMP", "nosuchkey")
	l.want("OK", "SET", "gone", "v", "PX", "1")
	l.index += 10
	l.want("(nil)", "DUMP", "gone")
}

// RESTORE's errors, in Redis's order; a refused RESTORE changes nothing.
func TestRestoreErrors(t *testing.T) {
	fakeCodec(t)
	l := newLockLog(t)
	l.want("OK", "SET", "src", "payload")
	p := l.dumpOf("src")
	l.want("OK", "SET", "taken", "old")
	for _, c := range []struct {
		want string
		args []string
	}{
		{"ERR<ERR syntax error>", []string{"RESTORE", "k", "0", p, "NOPE"}},
		{"ERR<ERR syntax error>", []string{"RESTORE", "k", "0", p, "IDLETIME"}},
		{"ERR<ERR syntax error>", []string{"RESTORE", "k", "0", p, "FREQ", "1", "IDLETIME", "1"}},
		{"ERR<ERR syntax error>", []string{"RESTORE", "k", "0", p, "IDLETIME", "1", "FREQ", "1"}},
		{"ERR<ERR value is not an integer or out of range>", []string{"RESTORE", "k", "0", p, "IDLETIME", "x"}},
		{"ERR<ERR Invalid IDLETIME value, must be >= 0>", []string{"RESTORE", "k", "0", p, "IDLETIME", "-1"}},
		{"ERR<ERR Invalid FREQ value, must be >= 0 and <= 255>", []string{"RESTORE", "k", "0", p, "FREQ", "256"}},
		{"ERR<ERR Invalid FREQ value, must be >= 0 and <= 255>", []string{"RESTORE", "k", "0", p, "FREQ", "-1"}},
		// BUSYKEY before the TTL and the payload are looked at.
		{"ERR<BUSYKEY Target key name already exists.>", []string{"RESTORE", "taken", "x", "junk"}},
		{"ERR<ERR value is not an integer or out of range>", []string{"RESTORE", "k", "x", p}},
		{"ERR<ERR Invalid TTL value, must be >= 0>", []string{"RESTORE", "k", "-1", p}},
		{"ERR<ERR DUMP payload version or checksum are wrong>", []string{"RESTORE", "k", "0", "junk"}},
		{"ERR<ERR DUMP payload version or checksum are wrong>", []string{"RESTORE", "taken", "0", p[:len(p)-1], "REPLACE"}},
		{"ERR<ERR wrong number of arguments for 'restore' command>", []string{"RESTORE", "k", "0"}},
		{"ERR<ERR wrong number of arguments for 'dump' command>", []string{"DUMP", "k", "x"}},
	} {
		l.want(c.want, c.args...)
	}
	// A payload whose checksum is right but whose content is not a value.
	bad, _ := encodeDump(&rdb.Value{Kind: rdb.KindSet}, rdb.EncodeOptions{}) // an empty set
	l.want("ERR<ERR Bad data format>", "RESTORE", "taken", "0", string(bad), "REPLACE")
	dup, _ := encodeDump(&rdb.Value{Kind: rdb.KindHash, Hash: []rdb.Field{{Name: []byte("f")}, {Name: []byte("f")}}}, rdb.EncodeOptions{})
	l.want("ERR<ERR Bad data format>", "RESTORE", "taken", "0", string(dup), "REPLACE")
	l.want("old", "GET", "taken")
	l.want("0", "EXISTS", "k")
	// Accepted options (IDLETIME and FREQ are ignored).
	l.want("OK", "RESTORE", "k1", "0", p, "IDLETIME", "10", "IDLETIME", "20")
	l.want("OK", "RESTORE", "k2", "0", p, "freq", "255", "absttl")
	l.want("OK", "RESTORE", "taken", "0", p, "REPLACE")
	l.want("payload", "GET", "taken")
}

// TTLs: relative to the entry's clock, ABSTTL absolute, 0 none; a
// deadline already past answers OK and leaves no key (deleting the one
// REPLACE replaces).
func TestRestoreTTL(t *testing.T) {
	fakeCodec(t)
	l := newLockLog(t)
	l.want("3", "RPUSH", "src", "a", "b", "c")
	p := l.dumpOf("src")
	l.want("OK", "RESTORE", "rel", "5000", p)
	l.want("5000", "PTTL", "rel") // read at the write's clock
	now := int64(1_000_000 + l.index)
	l.want("OK", "RESTORE", "abs", strconv.FormatInt(now+10_000, 10), p, "ABSTTL")
	l.want(strconv.FormatInt(now+10_000, 10), "PEXPIRETIME", "abs")
	l.want("OK", "RESTORE", "past", "1", p, "ABSTTL")
	l.want("0", "EXISTS", "past")
	l.want("OK", "SET", "old", "v")
	l.want("OK", "RESTORE", "old", "1", p, "ABSTTL", "REPLACE")
	l.want("0", "EXISTS", "old")
	l.want("[a b c]", "LRANGE", "rel", "0", "-1")
}

// RESTORE over a key replaces it whole (another type, a collection's old
// elements gone), touches it for WATCH and detaches it from its lease.
func TestRestoreReplaces(t *testing.T) {
	fakeCodec(t)
	l := newLockLog(t)
	l.want("2", "SADD", "src", "x", "y")
	p := l.dumpOf("src")
	lease := l.id("LEASE", "GRANT", "10000")
	l.want("OK", "SET", "k", "v", "LEASE", lease)
	l.want("3", "HSET", "h", "a", "1", "b", "2", "c", "3")
	l.woken = map[string]int{}
	l.want("OK", "RESTORE", "k", "0", p, "REPLACE")
	l.want("OK", "RESTORE", "h", "0", p, "REPLACE")
	l.want("ERR<BUSYKEY Target key name already exists.>", "RESTORE", "h", "0", p)
	if fmt.Sprint(l.woken) != "map[h:1 k:1]" {
		t.Errorf("woken %v", l.woken)
	}
	l.want("1", "LEASE", "REVOKE", lease)
	l.want("[x y]", "SORT", "k", "ALPHA")
	l.want("[x y]", "SORT", "h", "ALPHA")
	l.want("set", "TYPE", "h")
}

// RESTORE decides everything at apply: two replicas applying the same
// entries (real payloads, relative TTLs, a stream with groups) end up with
// the same bytes.
func TestRestoreIsDeterministic(t *testing.T) {
	src := newLockLog(t)
	src.noLimits = true
	src.want("3", "RPUSH", "list", "a", "b", "c")
	src.want("2", "SADD", "set", "x", "1")
	src.want("2", "ZADD", "zset", "1", "a", "2", "b")
	big := []string{"HSET", "hash"}
	for i := 0; i < 700; i++ {
		big = append(big, "f"+strconv.Itoa(i), strconv.Itoa(i))
	}
	src.want("700", big...)
	for i := 1; i <= 150; i++ {
		src.want(strconv.Itoa(i)+"-0", "XADD", "stream", strconv.Itoa(i)+"-0", "f", "v")
	}
	src.want("OK", "XGROUP", "CREATE", "stream", "g", "0")
	src.do("XREADGROUP", "GROUP", "g", "c1", "COUNT", "3", "STREAMS", "stream", ">")
	var cmds [][][]byte
	for _, k := range []string{"list", "set", "zset", "hash", "stream"} {
		cmds = append(cmds, toArgs("RESTORE", k, "50000", src.dumpOf(k)))
	}
	var dbs []*pebble.DB
	for r := 0; r < 2; r++ {
		db := openMem(t)
		dbs = append(dbs, db)
		for i, args := range cmds {
			b := db.NewIndexedBatch()
			if rep := Apply(b, args, Env{Now: 7000 + int64(i), Index: uint64(20 + i)}); show(rep) != "OK" {
				t.Fatalf("replica %d: %s = %s", r, args[0], show(rep))
			}
			if err := b.Commit(pebble.NoSync); err != nil {
				t.Fatal(err)
			}
		}
	}
	all := func(db *pebble.DB) (out []string) {
		it, err := db.NewIter(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			out = append(out, fmt.Sprintf("%q=%q", it.Key(), it.Value()))
		}
		return out
	}
	a, b := all(dbs[0]), all(dbs[1])
	if len(a) < 800 || strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Fatalf("replicas differ (%d and %d storage keys)", len(a), len(b))
	}
	if got := show(Read(dbs[0], toArgs("PTTL", "list"), 7000)); got != "50000" {
		t.Errorf("PTTL list = %s, want 50000 (the entry's clock + 50000)", got)
	}
}
