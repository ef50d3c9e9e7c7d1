package kv

import (
	"github.com/kvorum/kvorum/internal/notify"

	"math"

	"github.com/kvorum/kvorum/internal/redisnum"
)

// COPY (and TOUCH, which is EXISTS: kvorum does not track access).

func init() {
	defParsed("copy", -3, "write denyoom", 1, 2, 1, "generic", "Copies the value of a key to a new key.", parseCopy, cmdCopy)
	def("touch", -2, "readonly fast", 1, -1, 1, "generic", "Returns the number of existing keys out of those specified after updating the time they were last accessed.", cmdExists, nil)
}

var (
	errCopyDB       = Error("ERR DB index is out of range")
	errCopySame     = Error("ERR source and destination objects are the same")
	errCopyIntRange = Error("ERR value is out of range, value must between -2147483648 and 2147483647")
)

// parseCopy parses COPY's options in Redis's order (copyCommand): REPLACE
// and DB db, each error as it comes, then the same-key check. kvorum has a
// single database: DB 0 is accepted, any other index is "out of range"
// (the reply SELECT gives too), where Redis would accept 1..15.
func parseCopy(args [][]byte) (replace bool, r Reply, ok bool) {
	for j := 3; j < len(args); j++ {
		switch {
		case eq(args[j], "REPLACE"):
			replace = true
		case eq(args[j], "DB") && j+1 < len(args):
			n, ok := redisnum.ParseInt(args[j+1])
			if !ok {
				return false, errNotInt, false
			}
			if n < math.MinInt32 || n > math.MaxInt32 {
				return false, errCopyIntRange, false
			}
			if n != 0 {
				return false, errCopyDB, false
			}
			j++
		default:
			return false, errSyntax, false
		}
	}
	if string(args[1]) == string(args[2]) {
		return false, errCopySame, false
	}
	return replace, Reply{}, true
}

// cmdCopy copies the source's record (value, type and TTL) to the
// destination; a collection's elements are copied to a new incarnation
// (O(N), as in Redis). The copy is a plain key: if the source is attached
// to a lease (SET ... LEASE id), the copy is not, so revoking or expiring
// the lease deletes the source and leaves the copy. (A destination that
// was itself attached to a lease is rewritten here, which detaches it, as
// any write does.)
func cmdCopy(x *ctx, args [][]byte, replace bool) Reply {
	rec, ok, err := x.load(args[1])
	if err != nil || !ok {
		return errOr(err, Int(0))
	}
	_, exists, err := x.loadHeader(args[2])
	if err != nil {
		return errReply(err)
	}
	if exists && !replace {
		return Int(0)
	}
	if isCollection(rec.typ) {
		if rec, err = x.copyColl(args[1], args[2], rec); err != nil {
			return errReply(err)
		}
	}
	if err := x.newOver(args[2]); err != nil {
		return errReply(err)
	}
	// store drops the destination's old incarnation, if any (an expired
	// one too), and stamps the key for WATCH.
	if err := x.store(args[2], &rec); err != nil {
		return errReply(err)
	}
	x.event(notify.Generic, "copy_to", args[2])
	return Int(1)
}
