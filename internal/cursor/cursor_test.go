package cursor

import (
	"bytes"
	"testing"
)

func TestRememberResume(t *testing.T) {
	var tab Table
	after := []byte("\x10abcdef")
	id := tab.Remember(Prefix(after[1:]), []byte("k"), 7, after)
	if id>>32 != uint64(Prefix([]byte("abcd"))) || uint32(id) == 0 {
		t.Fatalf("cursor %x: want P %x and a salt", id, Prefix([]byte("abcd")))
	}
	got, ok := tab.Resume(id, []byte("k"), 7)
	if !ok || !bytes.Equal(got, after) {
		t.Fatalf("Resume = %q, %v", got, ok)
	}
	got[0] = 'x' // a copy: the table's position stays
	if got, _ := tab.Resume(id, []byte("k"), 7); !bytes.Equal(got, after) {
		t.Fatal("Resume returned the table's own bytes")
	}
	for _, c := range []struct {
		key     string
		version uint64
	}{{"k", 8}, {"j", 7}, {"", 0}} {
		if _, ok := tab.Resume(id, []byte(c.key), c.version); ok {
			t.Errorf("cursor of k@7 resumed for %q@%d", c.key, c.version)
		}
	}
	if _, ok := tab.Resume(id^1, []byte("k"), 7); ok {
		t.Error("an unknown salt resumed")
	}
	tab.Forget()
	if _, ok := tab.Resume(id, []byte("k"), 7); ok {
		t.Error("resumed after Forget")
	}
}

// TestDistinctPositions: a number names one position; the same position
// may get several numbers.
func TestDistinctPositions(t *testing.T) {
	var tab Table
	seen := map[uint64]string{}
	for i := 0; i < 20000; i++ {
		after := []byte{'p', 'r', 'e', 'f', byte(i), byte(i >> 8)}
		id := tab.Remember(Prefix(after), nil, 0, after)
		if prev, ok := seen[id]; ok && prev != string(after) {
			t.Fatalf("cursor %x names %q and %q", id, prev, after)
		}
		seen[id] = string(after)
		if got, ok := tab.Resume(id, nil, 0); !ok || !bytes.Equal(got, after) {
			t.Fatalf("Resume(%x) = %q, %v", id, got, ok)
		}
	}
}

func TestPrefixFallback(t *testing.T) {
	for _, c := range []struct {
		pos, fallback string
	}{
		{"abcdef", "abcd"},
		{"ab", "ab"},
		{"ab\x00\x00zz", "ab"},
		{"", ""},
		{"\x00\x00\x00\x01", "\x00\x00\x00\x01"},
	} {
		id := uint64(Prefix([]byte(c.pos)))<<32 | 5
		if got := Fallback(id); string(got) != c.fallback {
			t.Errorf("Fallback of %q = %q, want %q", c.pos, got, c.fallback)
		}
		// The fallback is never after the position.
		if bytes.Compare(Fallback(id), []byte(c.pos)) > 0 {
			t.Errorf("Fallback of %q is after it", c.pos)
		}
	}
}
