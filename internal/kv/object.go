package kv

import (
	"strings"

	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/reply"
)

// OBJECT. Every collection is stored one element per Pebble key whatever
// its size, but OBJECT ENCODING answers the encoding Redis 7.0 would have
// chosen: for hashes, sets and sorted sets the small or big one, as the
// record's encoding flags say (see coll.go); quicklist for lists, as
// Redis 7.0 always; strings get Redis's rule for the current value (int,
// embstr, raw).

func init() {
	def("object", -2, "", 0, 0, 0, "generic", "A container for object introspection commands.", cmdObject, nil)
}

func cmdObject(x *ctx, args [][]byte) Reply {
	sub := strings.ToLower(string(args[1]))
	if sub == "help" {
		if len(args) != 2 {
			return wrongArity("object|help")
		}
		return Array(
			BulkString("OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"),
			BulkString("ENCODING <key>"),
			BulkString("    Return the kind of internal representation used in order to store the value"),
			BulkString("    associated with a <key>."),
			BulkString("REFCOUNT <key>"),
			BulkString("    Return the number of references of the value associated with the specified"),
			BulkString("    <key>. Always 1 in kvorum."),
			BulkString("IDLETIME <key>, FREQ <key>"),
			BulkString("    Not supported: kvorum does not track key access."),
			BulkString("HELP"),
			BulkString("    Print this help."),
		)
	}
	switch sub {
	case "encoding", "refcount", "idletime", "freq":
	default:
		b := reply.AppendCString([]byte("ERR unknown subcommand '"), args[1], len(args[1]))
		return reply.ErrorText(append(b, "'. Try OBJECT HELP."...))
	}
	if len(args) != 3 {
		return wrongArity("object|" + sub)
	}
	rec, ok, err := x.load(args[2])
	if err != nil || !ok {
		return errOr(err, Nil)
	}
	switch sub {
	case "refcount":
		return Int(1)
	case "idletime", "freq":
		return Error("ERR OBJECT " + strings.ToUpper(sub) + " is not supported by kvorum: it does not track key access")
	}
	switch rec.typ {
	case typeString:
		if len(rec.value) <= 20 {
			if _, ok := redisnum.ParseInt(rec.value); ok {
				return BulkString("int")
			}
		}
		if len(rec.value) <= 44 {
			return BulkString("embstr")
		}
		return BulkString("raw")
	case typeHash:
		return BulkString(x.pick(rec, "listpack", "hashtable"))
	case typeSet:
		return BulkString(x.pick(rec, "intset", "hashtable"))
	case typeList:
		return BulkString("quicklist")
	case typeZSet:
		return BulkString(x.pick(rec, "listpack", "skiplist"))
	case typeStream:
		return BulkString("stream")
	}
	return Nil
}

// pick returns big if collection rec has the big encoding, else small.
func (x *ctx) pick(rec record, small, big string) string {
	if x.isBig(rec) {
		return big
	}
	return small
}
