package kv

import (
	"strconv"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// TestObjectEncodingSettingsAndOldRecords: the state machine's Settings
// (one copy for every Apply) follow KVORUM.CONFIG SET at once, and the
// store again after Reset (a snapshot); a record written before kvorum
// tracked encodings (flags 0) answers by its length, and keeps that answer
// once written.
func TestObjectEncodingSettingsAndOldRecords(t *testing.T) {
	db := openMem(t)
	s := &Settings{}
	apply := func(args ...string) Reply {
		b := db.NewIndexedBatch()
		defer b.Close()
		testIndex++
		bs := make([][]byte, len(args))
		for i, a := range args {
			bs[i] = []byte(a)
		}
		r := Apply(b, bs, Env{Now: time.Now().UnixMilli(), Index: testIndex, Settings: s})
		if err := b.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		return r
	}
	enc := func(k, want string) {
		t.Helper()
		if got := runKV(db, []string{"OBJECT", "ENCODING", k}); string(got.Str) != want {
			t.Fatalf("OBJECT ENCODING %s = %q, want %q", k, got.Str, want)
		}
	}
	apply("KVORUM.CONFIG", "SET", "hash-max-listpack-entries", "2")
	apply("HSET", "h", "a", "1", "b", "2")
	enc("h", "listpack")
	apply("HSET", "h", "c", "3")
	enc("h", "hashtable")
	s, old := &Settings{}, s // another node's copy, from here on
	apply("KVORUM.CONFIG", "SET", "hash-max-listpack-entries", "1")
	s = old
	apply("HSET", "h2", "a", "1", "b", "2")
	enc("h2", "listpack") // s has not seen the change
	s.Reset()
	apply("HSET", "h2", "a", "1", "b", "2")
	enc("h2", "hashtable")
	apply("KVORUM.CONFIG", "SET", "hash-max-listpack-entries", "512")

	clearFlags := func(k string) {
		v, ok, err := getCopy(db, metaKey([]byte(k)))
		if err != nil || !ok {
			t.Fatal(k, ok, err)
		}
		v[1] = 0
		if err := db.Set(metaKey([]byte(k)), v, nil); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"HSET", "big"}
	for i := 0; i < 513; i++ {
		args = append(args, strconv.Itoa(i), "v")
	}
	apply(args...)
	apply("HSET", "long", "f", string(make([]byte, 65)))
	enc("long", "hashtable")
	clearFlags("big")
	clearFlags("long")
	enc("big", "hashtable")
	enc("long", "listpack") // what it held is not known without a scan
	apply("HDEL", "big", "0", "1")
	enc("big", "hashtable")
	apply("HSET", "long", "g", "1")
	enc("long", "listpack")
}
