package notify

import "testing"

// TestParseAndString: the flags as redis-server 7.0 reads and spells them
// (CONFIG SET notify-keyspace-events X, then CONFIG GET).
func TestParseAndString(t *testing.T) {
	for _, c := range []struct{ in, out string }{
		{"", ""},
		{"KEA", "AKE"},
		{"KgExgn", "gxnKE"},
		{"An", "A"}, // n stays in effect, unseen
		{"Ex", "xE"},
		{"g$lshzxetdKEm", "AKEm"},
		{"AKEm", "AKEm"},
	} {
		f, ok := Parse(c.in)
		if !ok || f.String() != c.out {
			t.Errorf("Parse(%q) = %q, %v; want %q", c.in, f.String(), ok, c.out)
		}
	}
	if f, _ := Parse("An"); f&New == 0 {
		t.Error("An lost n")
	}
	for _, bad := range []string{"Q", "ka", "K E", "a"} {
		if _, ok := Parse(bad); ok {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

// TestPublish: keyspace then keyevent, only for selected classes, and
// nothing without K or E.
func TestPublish(t *testing.T) {
	var got []string
	pub := func(ch, msg []byte) { got = append(got, string(ch)+" "+string(msg)) }
	var scratch []byte
	f, _ := Parse("KEl")
	Publish(f, List, "lpush", []byte("k"), &scratch, pub)
	Publish(f, Hash, "hset", []byte("k"), &scratch, pub)
	want := []string{"__keyspace@0__:k lpush", "__keyevent@0__:lpush k"}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %q, want %q", got, want)
	}
	got = nil
	f, _ = Parse("A")
	Publish(f, List, "lpush", []byte("k"), &scratch, pub)
	if len(got) != 0 {
		t.Fatalf("A without K or E published %q", got)
	}
}
