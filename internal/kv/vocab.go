package kv

import "github.com/kvorum/kvorum/internal/reply"

// The command code in this package speaks the reply vocabulary of package
// reply unqualified: Reply is an alias, not a new type, so a kv.Reply is a
// reply.Reply everywhere; the kinds are spelled reply.KindX.
type Reply = reply.Reply

var (
	OK       = reply.OK
	Nil      = reply.Nil
	NilArray = reply.NilArray
)

// Constructors, as in package reply (functions, not variables, so that
// they inline).
func Status(s string) Reply        { return reply.Status(s) }
func Error(s string) Reply         { return reply.Error(s) }
func Int(n int64) Reply            { return reply.Int(n) }
func Bulk(b []byte) Reply          { return reply.Bulk(b) }
func BulkString(s string) Reply    { return reply.BulkString(s) }
func Array(elems ...Reply) Reply   { return reply.Array(elems...) }
func Double(f float64) Reply       { return reply.Double(f) }
func Map(kvs ...Reply) Reply       { return reply.Map(kvs...) }
func Pairs(ab ...Reply) Reply      { return reply.Pairs(ab...) }
func NestedMap(kvs ...Reply) Reply { return reply.NestedMap(kvs...) }
