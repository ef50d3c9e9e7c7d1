package server

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvorum/kvorum/internal/kv"
	"github.com/kvorum/kvorum/internal/reccache"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/storage"
)

// TestReadAtSeesOneState: readAt answers a multi-key read (MGET) and a
// collection read (HGETALL, LRANGE) from one state of the store while
// batches that change every key and element together commit concurrently;
// single-record reads go through the read cache. kv.Read on the DB itself
// mixes states here within a few hundred reads. Bounded: 300 rounds of
// reads or 3 s.
func TestReadAtSeesOneState(t *testing.T) {
	db, err := storage.Open("/db", storage.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	shared := reccache.NewShared(1 << 20)
	records := reccache.New(1000)
	records.Share(shared)
	const n = 40
	mset, hset, rpush := toArgs("MSET"), toArgs("HSET", "h"), toArgs("RPUSH", "l")
	mget := toArgs("MGET")
	for i := range n {
		mset = append(mset, []byte(fmt.Sprint("k", i)), nil)
		mget = append(mget, []byte(fmt.Sprint("k", i)))
		hset = append(hset, []byte(fmt.Sprint("f", i)), nil)
	}
	write := func(v int, index uint64) {
		val := []byte(fmt.Sprint(v))
		for i := range n {
			mset[2+2*i], hset[3+2*i] = val, val
		}
		b := db.NewIndexedBatch()
		defer b.Close()
		kv.Apply(b, toArgs("DEL", "l"), kv.Env{Now: 1, Index: index, Records: records})
		for _, args := range [][][]byte{mset, hset, append(rpush, val, val, val)} {
			if r := kv.Apply(b, args, kv.Env{Now: 1, Index: index, Records: records}); r.IsError() {
				t.Error(r)
			}
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			t.Error(err)
		}
		records.Publish()
	}
	write(0, 1)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for v := 1; ; v++ {
			select {
			case <-stop:
				return
			default:
			}
			write(v, uint64(v+1))
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	same := func(r kv.Reply) bool {
		for _, e := range r.Elems {
			if !reflect.DeepEqual(e, r.Elems[0]) {
				return false
			}
		}
		return len(r.Elems) > 0
	}
	deadline := time.Now().Add(3 * time.Second)
	i := 0
	for ; i < 300 && time.Now().Before(deadline); i++ {
		if r := readAt(db, shared, mget, 1); !same(r) {
			t.Fatalf("read %d: MGET mixed two states: %v", i, r)
		}
		if r := readAt(db, shared, toArgs("LRANGE", "l", "0", "-1"), 1); len(r.Elems) != 3 || !same(r) {
			t.Fatalf("read %d: LRANGE mixed two states: %v", i, r)
		}
		h := readAt(db, shared, toArgs("HGETALL", "h"), 1)
		vals := kv.Reply{}
		for j := 1; j < len(h.Elems); j += 2 {
			vals.Elems = append(vals.Elems, h.Elems[j])
		}
		if len(vals.Elems) != n || !same(vals) {
			t.Fatalf("read %d: HGETALL mixed two states: %v", i, h)
		}
		if r := readAt(db, shared, toArgs("GET", "k0"), 1); r.IsError() || r.Kind != reply.KindBulk {
			t.Fatalf("GET: %v", r)
		}
	}
	if i < 20 {
		t.Fatalf("only %d rounds of reads in 3 s", i)
	}
	if st := shared.Stats(); st.Hits == 0 {
		t.Fatalf("GET never hit the read cache: %+v", st)
	}
}

func toArgs(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i, a := range s {
		out[i] = []byte(a)
	}
	return out
}
