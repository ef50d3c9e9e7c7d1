package kv

import "github.com/kvorum/kvorum/internal/notify"

// Key-miss events (notify-keyspace-events class m). Redis emits keymiss
// where a command looks a key up for reading (lookupKeyRead) and finds
// none. kvorum's read commands report their misses through ctx.get
// (missOn: the node serving a read proposes KVORUM.KEYMISS with them; a
// read inside MULTI/EXEC or a script emits them at apply, see call).
// Write commands look keys up for writing too, so the keys Redis reads
// in them are listed per command (cmdspec.ReadKeys) and checked before
// the command runs, as Redis looks them up before it writes.

// readLookups makes the read lookups of write command d (args) before it
// runs, as Redis does: it counts them (Effects.Looked) and emits keymiss
// for the keys absent. They feed nothing else, so they are made only
// where someone looks: on the node that reports them (the leader,
// countLooked) or while the m class is on; elsewhere (a follower, class m
// off) a write pays one nil test here and no lookup.
func (x *ctx) readLookups(d *cmdDef, args [][]byte) error {
	f := d.readKeys
	if f == nil || x.fx == nil || !x.countLooked && !x.notify.Emits(notify.KeyMiss) {
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
