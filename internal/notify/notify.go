// Package notify holds the vocabulary of Redis keyspace notifications:
// the event classes that the notify-keyspace-events parameter selects
// (Redis's flag letters), their parsing and canonical form, and the
// channels an event is published on.
//
// An event is published at most twice: on __keyspace@0__:<key> with the
// event name as the message (flag K), and on __keyevent@0__:<event> with
// the key as the message (flag E), and only if its class is selected. The
// state machine (package kv) emits the events at apply, on every replica,
// as messages of the entry that caused them; each node delivers them to
// its own subscribers, like PUBLISH.
package notify

import "strings"

// Param is the name of the CONFIG parameter that holds the flags.
const Param = "notify-keyspace-events"

// Flags is a set of notify-keyspace-events flags, bit for bit Redis's
// NOTIFY_* constants.
type Flags uint32

// Redis's flags, in the order of its NOTIFY_* constants.
const (
	Keyspace Flags = 1 << iota // K: __keyspace@<db>__:<key> channels
	Keyevent                   // E: __keyevent@<db>__:<event> channels
	Generic                    // g: DEL, EXPIRE, RENAME, ...
	String                     // $
	List                       // l
	Set                        // s
	Hash                       // h
	ZSet                       // z
	Expired                    // x: a key deleted because its TTL passed
	Evicted                    // e: never emitted (kvorum does not evict)
	Stream                     // t
	KeyMiss                    // m: a read lookup found no key (kv/keymiss.go)
	loaded                     // module-only in Redis; no letter
	Module                     // d: never emitted (no modules)
	New                        // n: a key created

	// All is the classes of the letter A (n and m are not among them).
	All = Generic | String | List | Set | Hash | ZSet | Expired | Evicted | Stream | Module
)

// letters maps each flag letter but A to its flag.
var letters = []struct {
	c byte
	f Flags
}{
	{'g', Generic}, {'$', String}, {'l', List}, {'s', Set}, {'h', Hash}, {'z', ZSet},
	{'x', Expired}, {'e', Evicted}, {'t', Stream}, {'d', Module}, {'n', New},
	{'K', Keyspace}, {'E', Keyevent}, {'m', KeyMiss},
}

// Parse reads a notify-keyspace-events value as Redis does: any
// combination of the letters "Ag$lshzxeKEtmdn" (case-sensitive, repeats
// allowed; "" disables every event). ok=false: a character that is none.
func Parse(s string) (f Flags, ok bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == 'A' {
			f |= All
			continue
		}
		found := false
		for _, l := range letters {
			if l.c == s[i] {
				f |= l.f
				found = true
				break
			}
		}
		if !found {
			return 0, false
		}
	}
	return f, true
}

// String returns f as CONFIG GET shows it, spelled as Redis 7.0 spells
// it: "A" if every class of A is set (and then no other class letter, n
// included, although n stays in effect), else the class letters; then K,
// E and m.
func (f Flags) String() string {
	var b strings.Builder
	all := f&All == All
	if all {
		b.WriteByte('A')
	}
	for _, l := range letters {
		class := l.f != Keyspace && l.f != Keyevent && l.f != KeyMiss
		if f&l.f != 0 && !(class && all) {
			b.WriteByte(l.c)
		}
	}
	return b.String()
}

// Emits reports whether flags publish events of class at all.
func (f Flags) Emits(class Flags) bool {
	return f&class != 0 && f&(Keyspace|Keyevent) != 0
}

// Channel prefixes (database 0, the only one kvorum has).
const (
	KeyspacePrefix = "__keyspace@0__:"
	KeyeventPrefix = "__keyevent@0__:"
)

// Publish calls pub with the channel and message of each publication of
// event (of class) on key under flags, in Redis's order (keyspace first),
// building the channel in *scratch. Nothing if the class is not selected.
func Publish(f Flags, class Flags, event string, key []byte, scratch *[]byte, pub func(channel, message []byte)) {
	if !f.Emits(class) {
		return
	}
	if f&Keyspace != 0 {
		b := append(append((*scratch)[:0], KeyspacePrefix...), key...)
		*scratch = b
		pub(b, []byte(event))
	}
	if f&Keyevent != 0 {
		b := append(append((*scratch)[:0], KeyeventPrefix...), event...)
		*scratch = b
		pub(b, key)
	}
}
