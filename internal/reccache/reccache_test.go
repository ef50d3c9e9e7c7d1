package reccache

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestCache: at most its number of keys, least recently used dropped
// first; a small value kept with its header, a large one cut to the
// header, a long key not cached (and an older entry for it dropped);
// absent keys cached as such; Clear empties it.
func TestCache(t *testing.T) {
	c := New(100)
	for i := 0; i < 1000; i++ {
		c.Put([]byte(fmt.Sprintf("k%04d", i)), []byte("hdr|v"), 4)
		if c.Len() > 100 {
			t.Fatalf("after %d keys: %d held, limit 100", i+1, c.Len())
		}
	}
	if _, _, ok := c.Get([]byte("k0000")); ok {
		t.Fatal("the oldest key survived 900 newer ones")
	}
	if enc, full, ok := c.Get([]byte("k0999")); !ok || !full || string(enc) != "hdr|v" {
		t.Fatalf("newest key: %q full=%v ok=%v", enc, full, ok)
	}
	big := append([]byte("hdr|"), bytes.Repeat([]byte("v"), SmallValue+1)...)
	c.Put([]byte("big"), big, 4)
	big[0] = 'X' // Put copied it
	if enc, full, ok := c.Get([]byte("big")); !ok || full || string(enc) != "hdr|" {
		t.Fatalf("large value: %q full=%v ok=%v", enc, full, ok)
	}
	c.PutAbsent([]byte("gone"))
	if enc, full, ok := c.Get([]byte("gone")); !ok || !full || enc != nil {
		t.Fatalf("absent key: %q full=%v ok=%v", enc, full, ok)
	}
	long := []byte(strings.Repeat("k", MaxKey+1))
	c.lru.Add(string(long), entry{enc: []byte("old"), full: true})
	c.Put(long, []byte("hdr|v"), 4)
	if _, _, ok := c.Get(long); ok {
		t.Fatal("a key longer than MaxKey is cached")
	}
	c.Forget([]byte("big"))
	if _, _, ok := c.Get([]byte("big")); ok {
		t.Fatal("Forget kept the key")
	}
	c.Clear()
	if c.Len() != 0 {
		t.Fatalf("Clear left %d keys", c.Len())
	}
}
