package resp

import (
	"github.com/kvorum/kvorum/internal/cmdspec"
	"github.com/kvorum/kvorum/internal/reply"
)

// The keys of a command (COMMAND GETKEYS, the ACL key checks) are found
// by package cmdspec (cmdspec.KeyRefs, from Redis's key specs); COMMAND
// INFO shows the specs.

// keySpecReply is the key spec as COMMAND INFO shows it.
func keySpecReply(s cmdspec.KeySpec) reply.Reply {
	str, num := reply.BulkString, func(n int) reply.Reply { return reply.Int(int64(n)) }
	typed := func(typ string, kvs ...reply.Reply) reply.Reply {
		return reply.Map(str("type"), str(typ), str("spec"), reply.Map(kvs...))
	}
	begin := typed("index", str("index"), num(s.Index))
	switch {
	case s.UnknownBegin:
		begin = typed("unknown")
	case s.Keyword != "":
		begin = typed("keyword", str("keyword"), str(s.Keyword), str("startfrom"), num(s.StartFrom))
	}
	find := typed("range", str("lastkey"), num(s.LastKey), str("keystep"), num(s.Step), str("limit"), num(s.Limit))
	switch {
	case s.UnknownFind:
		find = typed("unknown")
	case s.KeyNum:
		find = typed("keynum", str("keynumidx"), num(s.KeyNumIdx), str("firstkey"), num(s.FirstKey), str("keystep"), num(s.Step))
	}
	var kvs []reply.Reply
	if s.Notes != "" {
		kvs = append(kvs, str("notes"), str(s.Notes))
	}
	kvs = append(kvs, str("flags"), statusSet(s.Flags), str("begin_search"), begin, str("find_keys"), find)
	return reply.Map(kvs...)
}
