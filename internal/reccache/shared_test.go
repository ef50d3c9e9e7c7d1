package reccache

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
)

// TestSharedFillAndPublish: a fill is kept only if no write to its shard
// was published since its Get; a published write replaces a cached record
// (or caches the deletion), drops it when the new record is too big, and
// leaves an uncached key uncached; Clear empties everything and refuses
// fills begun before it.
func TestSharedFillAndPublish(t *testing.T) {
	s := NewShared(1 << 20)
	c := New(100)
	c.Share(s)
	k := []byte("k")
	if _, ok, _ := s.Get(k); ok {
		t.Fatal("empty cache hit")
	}

	// A fill raced by a published write of the key is refused.
	_, _, gen := s.Get(k)
	c.Wrote(k, []byte("hdr|new"), 4)
	c.Publish()
	s.Fill(k, []byte("hdr|old"), gen)
	if enc, ok, _ := s.Get(k); ok {
		t.Fatalf("stale fill kept: %q", enc)
	}
	// A fill with the current generation is kept, and a copy.
	_, _, gen = s.Get(k)
	v := []byte("hdr|new")
	s.Fill(k, v, gen)
	v[0] = 'X'
	if enc, ok, _ := s.Get(k); !ok || string(enc) != "hdr|new" {
		t.Fatalf("fill: %q ok=%v", enc, ok)
	}
	// A journalled write is invisible until published, then replaces it.
	old, _, _ := s.Get(k)
	c.Wrote(k, []byte("hdr|newer"), 4)
	if enc, _, _ := s.Get(k); string(enc) != "hdr|new" {
		t.Fatalf("unpublished write visible: %q", enc)
	}
	c.Publish()
	if enc, ok, _ := s.Get(k); !ok || string(enc) != "hdr|newer" {
		t.Fatalf("published write: %q ok=%v", enc, ok)
	}
	if string(old) != "hdr|new" {
		t.Fatalf("an entry handed out changed in place: %q", old)
	}
	// A deletion is cached as absent; a write of an uncached key is not
	// cached.
	c.Deleted(k)
	c.Wrote([]byte("other"), []byte("hdr|x"), 4)
	c.Publish()
	if enc, ok, _ := s.Get(k); !ok || enc != nil {
		t.Fatalf("deleted key: %q ok=%v", enc, ok)
	}
	if _, ok, _ := s.Get([]byte("other")); ok {
		t.Fatal("a write cached a key nobody read")
	}
	// A record too big to cache drops the cached one.
	_, _, gen = s.Get(k)
	s.Fill(k, []byte("hdr|small"), gen)
	c.Wrote(k, append([]byte("hdr|"), make([]byte, s.maxEntry)...), 4)
	c.Publish()
	if enc, ok, _ := s.Get(k); ok {
		t.Fatalf("too big a record left %q cached", enc)
	}
	// Clear empties the cache and refuses fills begun before it.
	_, _, gen = s.Get(k)
	s.Fill(k, []byte("hdr|v"), gen)
	_, _, gen = s.Get([]byte("k2"))
	c.Clear()
	c.Publish()
	s.Fill([]byte("k2"), []byte("hdr|v"), gen)
	if st := s.Stats(); st.Keys != 0 || st.Bytes != 0 {
		t.Fatalf("after Clear: %+v", st)
	}
}

// TestSharedBudget: the bytes held never pass the budget, the least
// recently used go first, a record bigger than a shard's share is never
// cached.
func TestSharedBudget(t *testing.T) {
	const budget = 256 << 10
	s := NewShared(budget)
	val := bytes.Repeat([]byte("v"), 200)
	for i := 0; i < 5000; i++ {
		k := []byte(fmt.Sprintf("key%05d", i))
		_, _, gen := s.Get(k)
		s.Fill(k, val, gen)
		if i == 0 {
			continue
		}
		if st := s.Stats(); st.Bytes > budget {
			t.Fatalf("after %d fills: %d bytes, budget %d", i+1, st.Bytes, budget)
		}
	}
	st := s.Stats()
	if st.Keys < 500 {
		t.Fatalf("only %d keys of 200 bytes in %d bytes", st.Keys, budget)
	}
	if _, ok, _ := s.Get([]byte("key00000")); ok {
		t.Fatal("the oldest key survived")
	}
	if _, ok, _ := s.Get([]byte("key04999")); !ok {
		t.Fatal("the newest key was evicted")
	}
	big := []byte("big")
	_, _, gen := s.Get(big)
	s.Fill(big, make([]byte, s.maxEntry), gen)
	if _, ok, _ := s.Get(big); ok {
		t.Fatal("a record bigger than maxEntry was cached")
	}
	if NewShared(1000) != nil {
		t.Fatal("a cache too small to use was made")
	}
}

// TestSharedConcurrent: readers filling while writes are published (run
// with -race). Every published value of a key is its write count; a
// reader that reads the "store" (the counter) after its Get and fills
// must never leave a value older than the newest published one cached.
func TestSharedConcurrent(t *testing.T) {
	s := NewShared(1 << 20)
	c := New(100)
	c.Share(s)
	const keys = 8
	var mu sync.Mutex // the "store": what a committed write left
	store := make([]int, keys)
	key := func(i int) []byte { return []byte(fmt.Sprintf("k%d", i)) }
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				i := n % keys
				if _, ok, gen := s.Get(key(i)); !ok {
					mu.Lock()
					v := store[i]
					mu.Unlock()
					s.Fill(key(i), []byte(fmt.Sprint(v)), gen)
				}
			}
		}()
	}
	for w := 1; w <= 3000; w++ {
		i := w % keys
		mu.Lock()
		store[i] = w // the commit
		mu.Unlock()
		c.Wrote(key(i), []byte(fmt.Sprint(w)), 0)
		c.Publish() // then the publication
	}
	close(stop)
	wg.Wait()
	for i := 0; i < keys; i++ {
		if enc, ok, _ := s.Get(key(i)); ok && string(enc) != fmt.Sprint(store[i]) {
			t.Errorf("key %d: cached %q, store holds %d", i, enc, store[i])
		}
	}
}
