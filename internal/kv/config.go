package kv

import (
	"github.com/kvorum/kvorum/internal/notify"
)

// Cluster-wide parameters: CONFIG SET of one is the internal write
// KVORUM.CONFIG SET, so that every replica changes it at the same log
// index (keyspace notifications are emitted at apply, by every replica);
// its value is a hidden key, carried by snapshots and kept by FLUSHALL.
// KVORUM.CONFIG GET reads one (a read, behind the usual barrier).

// configPrefix + parameter name: the parameter's value.
var configPrefix = []byte{userPrefix, 0x00, 0x00, 'c'}

// Settings is the apply loop's copy of the cluster-wide parameters,
// read from the store on first use and kept up to date by KVORUM.CONFIG
// SET. The state machine passes the same Settings to every Apply
// (Env.Settings) and calls Reset when a snapshot replaces the keyspace.
type Settings struct {
	loaded bool
	notify notify.Flags
}

// Reset makes the next Apply read the parameters from the store again.
func (s *Settings) Reset() { s.loaded = false }

// load reads the parameters if they are not loaded.
func (s *Settings) load(r readerI) error {
	if s.loaded {
		return nil
	}
	v, _, err := getCopy(r, configKey(notify.Param))
	if err != nil {
		return err
	}
	s.notify, _ = notify.Parse(string(v))
	s.loaded = true
	return nil
}

func configKey(name string) []byte { return append(append([]byte{}, configPrefix...), name...) }

func init() {
	def("kvorum.config", -3, "write", 0, 0, 0, "server", "Internal: reads or sets cluster-wide CONFIG parameters.", cmdConfig, checkConfig)
	table["kvorum.config"].internal = true
	table["kvorum.config"].readOnly = func(args [][]byte) bool { return eq(args[1], "GET") }
	specList = specList[:len(specList)-1] // internal: not in COMMAND
}

// checkConfig: GET name, or SET followed by name value pairs of known
// parameters with valid values (resp's CONFIG SET checks them first and
// answers Redis's errors; this only keeps bad entries out of the log).
func checkConfig(args [][]byte) (Reply, bool) {
	switch {
	case eq(args[1], "GET") && len(args) == 3:
		return Reply{}, true
	case eq(args[1], "SET") && len(args)%2 == 0:
		for i := 2; i < len(args); i += 2 {
			if string(args[i]) != notify.Param {
				return Error("ERR unknown cluster parameter '" + string(args[i]) + "'"), false
			}
			if _, ok := notify.Parse(string(args[i+1])); !ok {
				return Error("ERR invalid value for '" + notify.Param + "'"), false
			}
		}
		return Reply{}, true
	}
	return errSyntax, false
}

func cmdConfig(x *ctx, args [][]byte) Reply {
	if eq(args[1], "GET") {
		v, ok, err := getCopy(x.r, configKey(string(args[2])))
		if err != nil {
			return errReply(err)
		}
		if !ok {
			v = nil
		}
		f, _ := notify.Parse(string(v)) // the one parameter
		return BulkString(f.String())
	}
	for i := 2; i < len(args); i += 2 {
		f, _ := notify.Parse(string(args[i+1]))
		if err := x.w.Set(configKey(string(args[i])), args[i+1], nil); err != nil {
			return errReply(err)
		}
		if x.settings != nil {
			x.settings.notify = f
		}
	}
	return OK
}

// event emits keyspace notification event (of class) on key, if the
// cluster's notify-keyspace-events selects it: published messages of the
// entry, delivered by every node to its own subscribers.
func (x *ctx) event(class notify.Flags, event string, key []byte) {
	if x.notify.Emits(class) && x.fx != nil {
		notify.Publish(x.notify, class, event, key, &x.nbuf, func(ch, msg []byte) { x.fx.published(false, ch, msg) })
	}
}

// del removes k (as remove) and emits Redis's "del" if k held a live key.
func (x *ctx) del(k []byte) error {
	_, live, err := x.loadHeader(k)
	if err == nil {
		err = x.remove(k)
	}
	if err == nil && live {
		x.event(notify.Generic, "del", k)
	}
	return err
}

// collEvent is event for a collection a command has just saved, followed
// by Redis's "del" if the command emptied it (saveColl deleted it).
func (x *ctx) collEvent(class notify.Flags, event string, c *coll) {
	x.event(class, event, c.key)
	if c.length() <= 0 {
		x.event(notify.Generic, "del", c.key)
	}
}
