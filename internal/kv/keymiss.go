package kv

import (
	"strconv"

	"github.com/kvorum/kvorum/internal/notify"
)

// Key-miss events (notify-keyspace-events class m). Redis emits keymiss
// where a command looks a key up for reading (lookupKeyRead) and finds
// none. kvorum's read commands report their misses through ctx.get
// (missOn: the node serving a read proposes KVORUM.KEYMISS with them; a
// read inside MULTI/EXEC or a script emits them at apply, see call).
// Write commands look keys up for writing too, so the keys Redis reads
// in them are listed here, per command, and checked before the command
// runs, as Redis looks them up before it writes. Only while the m class
// is on: otherwise this costs nothing.

// missReadKeys returns the keys of a write command that Redis looks up
// for reading, in Redis's order.
var missReadKeys = map[string]func(args [][]byte) [][]byte{
	"getdel": firstKey, "getex": firstKey, "getset": firstKey, "copy": firstKey,
	"set": func(args [][]byte) [][]byte {
		for _, a := range args[3:] {
			if eq(a, "GET") {
				return args[1:2]
			}
		}
		return nil
	},
	"sunionstore": keysFrom(2), "sinterstore": keysFrom(2), "sdiffstore": keysFrom(2),
	"bitop": keysFrom(3), "pfmerge": keysFrom(1),
	"zunionstore": numKeysAt(2), "zinterstore": numKeysAt(2), "zdiffstore": numKeysAt(2),
	"zrangestore": secondKey, "geosearchstore": secondKey,
	"sort": firstKey, "georadius": firstKey, "georadiusbymember": firstKey,
}

func firstKey(args [][]byte) [][]byte  { return args[1:2] }
func secondKey(args [][]byte) [][]byte { return args[2:3] }

func keysFrom(i int) func([][]byte) [][]byte {
	return func(args [][]byte) [][]byte { return args[i:] }
}

// numKeysAt: numkeys at args[i], the keys after it.
func numKeysAt(i int) func([][]byte) [][]byte {
	return func(args [][]byte) [][]byte {
		n, err := strconv.Atoi(string(args[i]))
		if err != nil || n < 0 || i+1+n > len(args) {
			return nil
		}
		return args[i+1 : i+1+n]
	}
}

// readLookups makes the read lookups of write command d (args) before it
// runs, as Redis does: it counts them (Effects.Looked) and emits keymiss
// for the keys absent.
func (x *ctx) readLookups(d *cmdDef, args [][]byte) error {
	if x.fx == nil || !d.spec.Write {
		return nil
	}
	f := missReadKeys[d.spec.Name]
	if f == nil {
		return nil
	}
	for _, k := range f(args) {
		_, ok, err := x.loadHeader(k)
		switch {
		case err != nil:
			return err
		case ok:
			x.fx.Looked.Hits++
		default:
			x.fx.Looked.Misses++
			x.event(notify.KeyMiss, "keymiss", k)
		}
	}
	return nil
}

// keyMissed records a miss of k by a read command's lookup: emitted at
// once at apply, collected for KVORUM.KEYMISS on the read path.
func (x *ctx) keyMissed(k []byte) {
	if x.w != nil {
		x.event(notify.KeyMiss, "keymiss", k)
		return
	}
	x.missed = append(x.missed, append([]byte(nil), k...))
}

func init() {
	def("kvorum.keymiss", -2, "write", 0, 0, 0, "server", "Internal: emits the keymiss events of reads served by a node.", cmdKeyMiss, nil)
	table["kvorum.keymiss"].internal = true
	specList = specList[:len(specList)-1]
}

// cmdKeyMiss emits keymiss for each key: the misses of reads, which do not
// go through the log, reported by the node that served them (only while
// the m class is on) so that every node's subscribers get them, once.
func cmdKeyMiss(x *ctx, args [][]byte) Reply {
	for _, k := range args[1:] {
		x.event(notify.KeyMiss, "keymiss", k)
	}
	return OK
}
