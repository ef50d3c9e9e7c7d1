package kv

import (
	"strconv"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/notify"
	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/storage"
)

// Cluster-wide parameters: CONFIG SET of one is the internal write
// KVORUM.CONFIG SET, so that every replica changes it at the same log
// index (keyspace notifications are emitted at apply, by every replica);
// its value is a hidden key, carried by snapshots and kept by FLUSHALL.
// KVORUM.CONFIG GET reads one (a read, behind the usual barrier).

// configPrefix + parameter name: the parameter's value.
var configPrefix = []byte{userPrefix, 0x00, 0x00, 'c'}

// Settings is the apply loop's copy of one range's cluster-wide
// parameters, read from the store on first use and kept up to date by
// KVORUM.CONFIG SET (range 1) or KVORUM.CONFIGCOPY (any other range: its
// own copy, configcopy.go). The state machine passes each range's Applies
// that range's Settings (Env.Settings) and calls Reset when a snapshot
// replaces the range.
type Settings struct {
	loaded bool
	notify notify.Flags
	enc    [len(encParams)]int64 // the integer parameters, as encParams
	// notifyNow is notify for readers outside the apply loop (the node's
	// read path asks whether to report key misses: Notify).
	notifyNow atomic.Uint32
}

// Notify returns the cluster's notify-keyspace-events as the apply loop
// last saw it; safe to call from any goroutine (0 before the first Apply).
func (s *Settings) Notify() notify.Flags { return notify.Flags(s.notifyNow.Load()) }

func (s *Settings) setNotify(f notify.Flags) {
	s.notify = f
	s.notifyNow.Store(uint32(f))
}

// MaxMemory returns maxmemory as the apply loop last loaded or set it,
// ok=false before it first loaded the parameters. For the apply loop's
// goroutine only (the node copies it after each Apply for its write
// guard).
func (s *Settings) MaxMemory() (v int64, ok bool) { return s.enc[maxMemory], s.loaded }

// encParams are the cluster's integer parameters: the thresholds of
// Redis's small collection encodings (see the encoding flags in coll.go),
// the node limits of streams (stream.go), and maxmemory (enforced by the
// node before it proposes a write: ReadMaxMemory), under their Redis names
// (resp maps the old "ziplist" aliases), with the defaults of a
// redis-server 7.0 started without a configuration file. Values are
// stored in decimal.
var encParams = [...]struct {
	name string
	def  int64
}{{"hash-max-listpack-entries", 512}, {"hash-max-listpack-value", 64}, {"set-max-intset-entries", 512}, {"zset-max-listpack-entries", 128}, {"zset-max-listpack-value", 64},
	{"stream-node-max-bytes", 4096}, {"stream-node-max-entries", 100}, {"maxmemory", 0}}

const (
	hashEntries = iota
	hashValue
	setEntries
	zsetEntries
	zsetValue
	streamNodeMaxBytes
	streamNodeMaxEntries
	maxMemory
)

// encParam returns the index of parameter name in encParams, -1 if none.
func encParam(name []byte) int {
	for i, p := range encParams {
		if string(name) == p.name {
			return i
		}
	}
	return -1
}

// encValue is parameter i's value stored as v (nil: not set).
func encValue(i int, v []byte) int64 {
	if n, ok := redisnum.ParseInt(v); ok && n >= 0 {
		return n
	}
	return encParams[i].def
}

// entries is the most elements a collection of type typ has in its small
// encoding.
func (s *Settings) entries(typ byte) int64 {
	switch typ {
	case typeHash:
		return s.enc[hashEntries]
	case typeSet:
		return s.enc[setEntries]
	case typeZSet:
		return s.enc[zsetEntries]
	}
	return 1<<63 - 1
}

// streamNode returns stream-node-max-bytes and stream-node-max-entries.
func (s *Settings) streamNode() (maxBytes, maxEntries uint64) {
	return uint64(s.enc[streamNodeMaxBytes]), uint64(s.enc[streamNodeMaxEntries]) //nolint:gosec // never negative
}

// ReadMaxMemory reads the cluster's maxmemory parameter (bytes, 0: no limit)
// from r, a node's store: the node refuses writes flagged denyoom while
// its data set is larger (a read of the local state, not linearizable: a
// change reaches each node when it applies the KVORUM.CONFIG entry).
func ReadMaxMemory(r pebble.Reader) (int64, error) {
	v, _, err := getCopy(r, configKey("maxmemory"))
	if err != nil {
		return 0, err
	}
	return encValue(maxMemory, v), nil
}

// limits returns the cluster-wide parameters: the apply loop's copy, else
// (reads, and Applies without Settings in tests) read from the store, the
// defaults if that fails.
func (x *ctx) limits() *Settings {
	if x.settings == nil {
		x.settings = &Settings{}
		_ = x.settings.load(x.r, x.desc)
	}
	return x.settings
}

// Reset makes the next Apply read the parameters from the store again.
func (s *Settings) Reset() { s.loaded = false }

// load reads the parameters of desc's range if they are not loaded:
// range 1's own, or another range's copy (configcopy.go).
func (s *Settings) load(r readerI, desc *storage.Descriptor) error {
	if s.loaded {
		return nil
	}
	key := configKey
	if !authoritative(desc) {
		id := descRange(desc)
		key = func(name string) []byte { return configCopyKey(id, name) }
	}
	v, _, err := getCopy(r, key(notify.Param))
	if err != nil {
		return err
	}
	f, _ := notify.Parse(string(v))
	s.setNotify(f)
	for i, p := range encParams {
		if v, _, err = getCopy(r, key(p.name)); err != nil {
			return err
		}
		s.enc[i] = encValue(i, v)
	}
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
			name := string(args[i])
			n, ok := redisnum.ParseInt(args[i+1])
			switch {
			case encParam(args[i]) >= 0:
				ok = ok && n >= 0
			case name == notify.Param:
				_, ok = notify.Parse(string(args[i+1]))
			default:
				return Error("ERR unknown cluster parameter '" + name + "'"), false
			}
			if !ok {
				return Error("ERR invalid value for '" + name + "'"), false
			}
		}
		return Reply{}, true
	}
	return errSyntax, false
}

func cmdConfig(x *ctx, args [][]byte) Reply {
	if eq(args[1], "GET") {
		v, _, err := getCopy(x.r, configKey(string(args[2])))
		if err != nil {
			return errReply(err)
		}
		if i := encParam(args[2]); i >= 0 {
			return BulkString(strconv.FormatInt(encValue(i, v), 10))
		}
		f, _ := notify.Parse(string(v))
		return BulkString(f.String())
	}
	if !authoritative(x.desc) {
		// Only range 1 holds the parameters: another range would write
		// them at a different point of range 1's log on each node.
		return Error("ERR KVORUM.CONFIG SET is applied by range 1 only")
	}
	for i := 2; i < len(args); i += 2 {
		f, _ := notify.Parse(string(args[i+1]))
		if err := x.w.Set(configKey(string(args[i])), args[i+1], nil); err != nil {
			return errReply(err)
		}
		if j := encParam(args[i]); x.settings != nil && j >= 0 {
			x.settings.enc[j] = encValue(j, args[i+1])
		} else if x.settings != nil {
			x.settings.setNotify(f)
		}
	}
	if err := writeRangeOneCopy(x); err != nil {
		return errReply(err)
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

// newOver emits "new" for k if it holds a live key that a command
// replaces whole (RENAME, COPY REPLACE): Redis deletes it and adds it anew.
// (store emits "new" itself when k is absent.)
func (x *ctx) newOver(k []byte) error {
	if !x.notify.Emits(notify.New) {
		return nil
	}
	_, live, err := x.loadHeader(k)
	if err == nil && live {
		x.event(notify.New, "new", k)
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
