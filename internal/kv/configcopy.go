package kv

import (
	"encoding/binary"
	"strconv"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/notify"
	"github.com/kvorum/kvorum/internal/storage"
)

// Per-range copies of the cluster-wide parameters (docs/ranges.md §2.3,
// row 'c'). With several ranges each range's replicas apply its log on
// their own, so the parameters an Apply of range R uses must be part of
// R's replicated state: were they read from range 1's keys, a replica of
// R would see a CONFIG SET at whatever point of R's log its node happened
// to apply range 1's entry, and two replicas of R could encode the same
// hash differently.
//
//   - Range 1 (and the one range of an unsplit store) is authoritative: it
//     keeps the parameters in its 0x10 0x00 0x00 'c' keys, as before, and
//     reads them there. KVORUM.CONFIG SET also writes range 1's own copy
//     (below), versioned by the SET's log index, so that a split of range 1
//     hands the right-hand range the copy with the rest of the range-local
//     span.
//   - Every other range R reads its copy, 0x02 <R> 'r' 'C' <name>, and the
//     copy's version under 0x02 <R> 'r' 'C' (no name). A parameter with no
//     copy has its default. Only KVORUM.CONFIGCOPY, an entry of R's log,
//     writes it, so every replica of R uses the same parameters at the same
//     index of R's log: deterministic.
//
// A copy always carries every parameter, as range 1 had them at the
// copy's version (range 1's index of its last CONFIG SET): so a range's
// state is the copy with the highest version it applied, and
// KVORUM.CONFIGCOPY ignores a version not above the one it holds (an old
// copy arriving late, or twice, never undoes a newer one).
//
// How copies get there (internal/server/configcopy.go): the node that ran
// a CONFIG SET proposes the copy to every other range before it replies,
// so a client that got OK sees the new value in every range (immediately
// consistent for that client, barring a failure of one of those
// proposals); a loop on range 1's leader proposes the copy to any range
// whose version is behind range 1's (a new range, a range that missed a
// copy): eventually consistent.
//
// The tag is 'C', not the plan's 'c': snapshot streams carry format 1 keys
// (storage.LegacyKeys), where range-local key 'r' <name> becomes
// 0x10 0x00 0x00 <name>, and 'c' <name> would then collide with range 1's
// authoritative parameter keys.
const rangeConfig = 'C'

// authoritative reports whether desc's range holds the cluster's
// parameters (range 1, or the one range of an unsplit store).
func authoritative(desc *storage.Descriptor) bool {
	return !ranged(desc) || storage.RangeID(1) == descRange(desc)
}

// descRange is desc's range id (1 without one).
func descRange(desc *storage.Descriptor) storage.RangeID {
	if desc == nil || desc.RangeID == 0 {
		return 1
	}
	return desc.RangeID
}

// configCopyKey is range id's copy of parameter name ("" : the copy's
// version).
func configCopyKey(id storage.RangeID, name string) []byte {
	return storage.ReplicatedRangeKey(id, append([]byte{rangeConfig}, name...))
}

// copyParams are the names a copy carries: every cluster parameter.
func copyParams() []string {
	names := make([]string, 0, len(encParams)+1)
	for _, p := range encParams {
		names = append(names, p.name)
	}
	return append(names, notify.Param)
}

// ConfigCopyVersion returns the version of range id's copy of the
// parameters in r; ok=false: it has none.
func ConfigCopyVersion(r pebble.Reader, id storage.RangeID) (v uint64, ok bool, err error) {
	b, ok, err := getCopy(r, configCopyKey(id, ""))
	if err != nil || !ok || len(b) != 8 {
		return 0, false, err
	}
	return binary.BigEndian.Uint64(b), true, nil
}

// ConfigCopy returns the KVORUM.CONFIGCOPY command that carries range 1's
// parameters as r (a node's store, best a snapshot of it) holds them:
// version = range 1's copy version (0 if no CONFIG SET wrote one), and the
// value of every parameter (empty: unset, the default). The values are
// those of that version: a CONFIG SET writes the parameters and range 1's
// version in one entry.
func ConfigCopy(r pebble.Reader) (args [][]byte, version uint64, err error) {
	version, _, err = ConfigCopyVersion(r, 1)
	if err != nil {
		return nil, 0, err
	}
	args = [][]byte{[]byte("KVORUM.CONFIGCOPY"), []byte(strconv.FormatUint(version, 10))}
	for _, name := range copyParams() {
		v, _, err := getCopy(r, configKey(name))
		if err != nil {
			return nil, 0, err
		}
		if v == nil {
			v = []byte{}
		}
		args = append(args, []byte(name), v)
	}
	return args, version, nil
}

// writeRangeOneCopy writes range 1's copy of the parameters, from its
// authoritative keys in x (after a CONFIG SET wrote them), at version
// x.index.
func writeRangeOneCopy(x *ctx) error {
	var ver [8]byte
	binary.BigEndian.PutUint64(ver[:], x.index)
	if err := x.w.Set(configCopyKey(1, ""), ver[:], nil); err != nil {
		return err
	}
	for _, name := range copyParams() {
		v, _, err := getCopy(x.r, configKey(name))
		if err != nil {
			return err
		}
		if err := x.w.Set(configCopyKey(1, name), v, nil); err != nil {
			return err
		}
	}
	return nil
}

func init() {
	def("kvorum.configcopy", -2, "write", 0, 0, 0, "server", "Internal: writes a range's versioned copy of the cluster-wide CONFIG parameters.", cmdConfigCopy, checkConfigCopy)
	table["kvorum.configcopy"].internal = true
	specList = specList[:len(specList)-1] // internal: not in COMMAND
}

// checkConfigCopy: a version, then name value pairs of known parameters
// (values are range 1's, already checked by its KVORUM.CONFIG SET; empty:
// unset).
func checkConfigCopy(args [][]byte) (Reply, bool) {
	if len(args)%2 != 0 {
		return errSyntax, false
	}
	if _, err := strconv.ParseUint(string(args[1]), 10, 64); err != nil {
		return Error("ERR invalid config copy version"), false
	}
	for i := 2; i < len(args); i += 2 {
		if encParam(args[i]) < 0 && string(args[i]) != notify.Param {
			return Error("ERR unknown cluster parameter '" + string(args[i]) + "'"), false
		}
	}
	return Reply{}, true
}

// cmdConfigCopy: KVORUM.CONFIGCOPY version name value ... replaces the
// range's copy if version is above the one it holds, and replies 1; else
// it changes nothing and replies 0. Range 1 holds the parameters
// themselves: it replies 0.
func cmdConfigCopy(x *ctx, args [][]byte) Reply {
	if authoritative(x.desc) {
		return Int(0)
	}
	id := descRange(x.desc)
	version, _ := strconv.ParseUint(string(args[1]), 10, 64)
	cur, ok, err := ConfigCopyVersion(x.r, id)
	if err != nil {
		return errReply(err)
	}
	if ok && version <= cur {
		return Int(0)
	}
	var ver [8]byte
	binary.BigEndian.PutUint64(ver[:], version)
	if err := x.w.Set(configCopyKey(id, ""), ver[:], nil); err != nil {
		return errReply(err)
	}
	// A copy carries every parameter; one it lacks (a copy from a node
	// that knows fewer) goes back to its default.
	given := map[string]bool{}
	for i := 2; i < len(args); i += 2 {
		given[string(args[i])] = true
		if err := x.w.Set(configCopyKey(id, string(args[i])), args[i+1], nil); err != nil {
			return errReply(err)
		}
	}
	for _, name := range copyParams() {
		if !given[name] {
			if err := x.w.Delete(configCopyKey(id, name), nil); err != nil {
				return errReply(err)
			}
		}
	}
	if x.settings != nil {
		x.settings.Reset() // the range's next Apply reads the new copy
	}
	return Int(1)
}
