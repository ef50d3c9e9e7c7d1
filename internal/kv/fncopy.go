package kv

import (
	"bytes"
	"encoding/binary"
	"strconv"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvorum/kvorum/internal/storage"
)

// Per-range copies of the function libraries (docs/ranges.md §2.3, row
// 'F'), kept as the parameters' copies are (configcopy.go says why and
// how): range 1 holds the libraries (0x10 0x00 0x00 'F' …) and, under
// fnVersionKey, the log index of its last FUNCTION LOAD/DELETE/FLUSH/
// RESTORE; every other range R holds a mirror of range 1's 'F' keys under
// 0x02 <R> 'r' 'G' <the key after 0x10 0x00 0x00 'F'>, with its version
// under 0x02 <R> 'r' 'G', written only by KVORUM.FNCOPY entries of R's log.
// FCALL in R looks its function up in R's mirror: every replica of R runs
// the same code at the same index. FUNCTION LIST/DUMP/STATS and the
// writes are keyless: they go to range 1. Unlike the parameters, range 1
// keeps no mirror of its own (libraries may be large): a range split off
// range 1 gets its mirror from the split entry itself (SplitCopy), at the
// split's index, so FCALL works in it as soon as it exists.
const rangeFunctions = 'G'

// fnVersionKey is range 1's version of its libraries (uint64 BE): with
// the cluster's internal records next to the ACL's ('c' 0x00 …), not under
// 'F', which FUNCTION FLUSH empties and FunctionCopy mirrors.
var fnVersionKey = configKey("\x00fnver")

// fnCopyKey is range id's mirror of range 1's function key
// fnPrefix + suffix (suffix empty: the mirror's version).
func fnCopyKey(id storage.RangeID, suffix []byte) []byte {
	return storage.ReplicatedRangeKey(id, append([]byte{rangeFunctions}, suffix...))
}

// fnKey is where the entry's range reads function key k (under fnPrefix):
// k itself in range 1, the range's mirror elsewhere.
func (x *ctx) fnKey(k []byte) []byte {
	if authoritative(x.desc) {
		return k
	}
	return fnCopyKey(descRange(x.desc), k[len(fnPrefix):])
}

// writeFunctionVersion records, in range 1, that its libraries changed at
// x.index.
func writeFunctionVersion(x *ctx) error {
	var ver [8]byte
	binary.BigEndian.PutUint64(ver[:], x.index)
	return x.w.Set(fnVersionKey, ver[:], nil)
}

// FunctionCopyVersion returns the version of range id's mirror of the
// libraries in r (range 1: its own version); ok=false: none.
func FunctionCopyVersion(r pebble.Reader, id storage.RangeID) (v uint64, ok bool, err error) {
	k := fnVersionKey
	if id != 1 {
		k = fnCopyKey(id, nil)
	}
	b, ok, err := getCopy(r, k)
	if err != nil || !ok || len(b) != 8 {
		return 0, false, err
	}
	return binary.BigEndian.Uint64(b), true, nil
}

// FunctionCopy returns the KVORUM.FNCOPY command that carries range 1's
// libraries as r (best a snapshot of a node's store) holds them, with
// their version (0 if no function write recorded one).
func FunctionCopy(r pebble.Reader) (args [][]byte, version uint64, err error) {
	version, _, err = FunctionCopyVersion(r, 1)
	if err != nil {
		return nil, 0, err
	}
	args = [][]byte{[]byte("KVORUM.FNCOPY"), []byte(strconv.FormatUint(version, 10))}
	err = iterPrefix(r, fnPrefix, func(k, v []byte) error {
		args = append(args, bytes.Clone(k[len(fnPrefix):]), bytes.Clone(v))
		return nil
	})
	return args, version, err
}

func init() {
	def("kvorum.fncopy", -2, "write", 0, 0, 0, "scripting", "Internal: writes a range's versioned copy of the function libraries.", cmdFnCopy, checkFnCopy)
	table["kvorum.fncopy"].internal = true
	specList = specList[:len(specList)-1] // internal: not in COMMAND
}

// checkFnCopy: a version, then pairs of a function key's suffix (a
// library 'l' or a function name 'n') and its value.
func checkFnCopy(args [][]byte) (Reply, bool) {
	if len(args)%2 != 0 {
		return errSyntax, false
	}
	if _, err := strconv.ParseUint(string(args[1]), 10, 64); err != nil {
		return Error("ERR invalid function copy version"), false
	}
	for i := 2; i < len(args); i += 2 {
		if len(args[i]) < 1 || (args[i][0] != 'l' && args[i][0] != 'n') {
			return Error("ERR invalid function copy key"), false
		}
	}
	return Reply{}, true
}

// cmdFnCopy: KVORUM.FNCOPY version suffix value ... replaces the range's
// mirror if version is above the one it holds and replies 1; else it
// changes nothing and replies 0 (range 1 too: it holds the libraries).
func cmdFnCopy(x *ctx, args [][]byte) Reply {
	if authoritative(x.desc) {
		return Int(0)
	}
	id := descRange(x.desc)
	version, _ := strconv.ParseUint(string(args[1]), 10, 64)
	cur, ok, err := FunctionCopyVersion(x.r, id)
	if err != nil {
		return errReply(err)
	}
	if ok && version <= cur {
		return Int(0)
	}
	start := fnCopyKey(id, nil)
	if err := x.w.DeleteRange(start, prefixEnd(start), nil); err != nil {
		return errReply(err)
	}
	var ver [8]byte
	binary.BigEndian.PutUint64(ver[:], version)
	if err := x.w.Set(start, ver[:], nil); err != nil {
		return errReply(err)
	}
	for i := 2; i < len(args); i += 2 {
		if err := x.w.Set(fnCopyKey(id, args[i]), args[i+1], nil); err != nil {
			return errReply(err)
		}
	}
	return Int(1)
}

// SplitCopy writes into b what the right-hand range rhs of a split of
// range lhs gets besides the copy of lhs's replicated range-local keys
// (store's applySplit, at the split entry's index): for a split of range
// 1, a mirror of range 1's libraries as b holds them at that index, with
// their version. Range 1 keeps no mirror of its own, so the range-local
// copy carries none, and without this the new range would answer
// "Function not found" until the function queue copied them. A range
// other than 1 has its mirror among its range-local keys: nothing to do.
// Deterministic: it reads only range 1's replicated state, through b, as
// every replica of range 1 has it at the same index of its log.
func SplitCopy(b *pebble.Batch, lhs, rhs storage.RangeID) error {
	if lhs != 1 || rhs == 1 {
		return nil
	}
	version, ok, err := FunctionCopyVersion(b, 1)
	if err != nil {
		return err
	}
	n := 0
	err = iterPrefix(b, fnPrefix, func(k, v []byte) error {
		n++
		return b.Set(fnCopyKey(rhs, k[len(fnPrefix):]), v, nil)
	})
	if err != nil || (!ok && n == 0) {
		return err
	}
	var ver [8]byte
	binary.BigEndian.PutUint64(ver[:], version)
	return b.Set(fnCopyKey(rhs, nil), ver[:], nil)
}
