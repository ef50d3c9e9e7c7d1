package kvdiff

import (
	"math/rand/v2"
	"strconv"
)

// Gen draws random commands over every data type from a seed: valid and
// invalid calls mixed, wrong types (all families share a few key names),
// edge values, empty collections, negative indices and huge counts. The
// same seed gives the same sequence.
//
// With Deterministic set it only draws commands whose reply Redis fixes
// (no SPOP, SRANDMEMBER, HRANDFIELD, RANDOMKEY; SCAN-like commands with a
// COUNT that returns everything in one page), so replies can be compared
// with a real redis-server. Without it, it draws those too (for fuzzing and
// replica convergence, where only determinism across replicas matters).
type Gen struct {
	rng           *rand.Rand
	Deterministic bool
	gens          []func() []string
}

// NewGen returns a generator for seed.
func NewGen(seed uint64, deterministic bool) *Gen {
	g := &Gen{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), Deterministic: deterministic}
	g.init()
	return g
}

// Next returns the next command.
func (g *Gen) Next() []string { return g.gens[g.rng.IntN(len(g.gens))]() }

func (g *Gen) pick(s ...string) string { return s[g.rng.IntN(len(s))] }
func (g *Gen) n(max int) int           { return g.rng.IntN(max) }

func (g *Gen) key() string { return g.pick("a", "b", "c", "d", "a", "b", "") }
func (g *Gen) val() string {
	return g.pick("", "0", "1", "-5", "12", "x", "y", "z", "abc", "9223372036854775807", "1.5", "x y", "\x00", "hello", "a", "b", "c")
}
func (g *Gen) member() string {
	return g.pick("a", "b", "c", "d", "e", "f", "", "1", "2", "x y", "\xff")
}
func (g *Gen) field() string { return g.pick("f", "g", "h", "i", "", "1", "f2") }
func (g *Gen) idx() string {
	return g.pick("0", "1", "2", "-1", "-2", "3", "-100", "100", "5", "x", "9223372036854775807", "-9223372036854775808")
}
func (g *Gen) count() string {
	return g.pick("0", "1", "2", "3", "-1", "-3", "10", "1000000", "x", "2147483648")
}
func (g *Gen) score() string {
	return g.pick("0", "1", "2", "-1", "1.5", "2.5", "-0", "inf", "-inf", "+inf", "1e3", "3", "x", "nan", "0.1", "10")
}
func (g *Gen) bound() string {
	return g.pick("-inf", "+inf", "0", "1", "(1", "2", "(2", "-1", "1.5", "(0", "x", "3", "10")
}
func (g *Gen) lex() string { return g.pick("-", "+", "[a", "(a", "[c", "(c", "[", "a", "[b", "(e") }
func (g *Gen) ttl() string { return g.pick("100", "200", "300", "-1", "0", "x") }

// many returns the result of f called 1..max times, flattened.
func (g *Gen) many(max int, f func() []string) []string {
	var out []string
	for i := 1 + g.n(max); i > 0; i-- {
		out = append(out, f()...)
	}
	return out
}

func one(f func() string) func() []string { return func() []string { return []string{f()} } }

func (g *Gen) cmd(name string, args ...string) []string { return append([]string{name}, args...) }

func (g *Gen) init() {
	c := g.cmd
	keys := func(max int) []string { return g.many(max, one(g.key)) }
	numkeys := func() []string {
		ks := keys(3)
		n := strconv.Itoa(len(ks))
		if g.n(8) == 0 {
			n = g.pick("0", "-1", "5", "x")
		}
		return append([]string{n}, ks...)
	}
	g.gens = []func() []string{
		// strings and keyspace
		func() []string { return c("SET", g.key(), g.val()) },
		func() []string { return c("SET", g.key(), g.val(), g.pick("NX", "XX", "GET", "KEEPTTL")) },
		func() []string { return c("GET", g.key()) },
		func() []string { return c(g.pick("INCR", "DECR"), g.key()) },
		func() []string { return c("INCRBY", g.key(), g.idx()) },
		func() []string { return c("APPEND", g.key(), g.val()) },
		func() []string { return c("MSET", g.key(), g.val(), g.key(), g.val()) },
		func() []string { return c("MGET", g.key(), g.key()) },
		func() []string { return c("DEL", keys(2)...) },
		func() []string { return c("UNLINK", keys(2)...) },
		func() []string { return c("EXISTS", keys(3)...) },
		func() []string { return c("TYPE", g.key()) },
		func() []string { return c(g.pick("RENAME", "RENAMENX"), g.key(), g.key()) },
		func() []string { return c("EXPIRE", g.key(), g.ttl()) },
		func() []string { return c("PERSIST", g.key()) },
		func() []string { return c("TTL", g.key()) },
		func() []string { return c("KEYS", g.pick("*", "?", "[ab]", "*a*", "")) },
		func() []string {
			return c("SCAN", "0", "COUNT", "1000", "TYPE", g.pick("string", "hash", "list", "set", "zset", "none"))
		},
		func() []string { return c("DBSIZE") },

		// hashes
		func() []string {
			return c("HSET", append([]string{g.key()}, g.many(3, func() []string { return []string{g.field(), g.val()} })...)...)
		},
		func() []string { return c("HSET", g.key(), g.field()) },
		func() []string { return c("HMSET", g.key(), g.field(), g.val()) },
		func() []string { return c("HSETNX", g.key(), g.field(), g.val()) },
		func() []string { return c("HGET", g.key(), g.field()) },
		func() []string { return c("HMGET", append([]string{g.key()}, g.many(3, one(g.field))...)...) },
		func() []string { return c("HGETALL", g.key()) },
		func() []string { return c("HDEL", append([]string{g.key()}, g.many(3, one(g.field))...)...) },
		func() []string { return c("HEXISTS", g.key(), g.field()) },
		func() []string { return c(g.pick("HLEN", "HKEYS", "HVALS"), g.key()) },
		func() []string { return c("HINCRBY", g.key(), g.field(), g.idx()) },
		func() []string {
			return c("HINCRBYFLOAT", g.key(), g.field(), g.pick("1.5", "-0.25", "3", "x", "1e3", "inf"))
		},
		func() []string { return c("HSTRLEN", g.key(), g.field()) },
		func() []string { return c("HSCAN", g.key(), "0", "COUNT", "1000") },
		func() []string { return c("HSCAN", g.key(), "0", "MATCH", g.pick("f*", "*", "?"), "COUNT", "1000") },

		// lists
		func() []string {
			return c(g.pick("LPUSH", "RPUSH"), append([]string{g.key()}, g.many(4, one(g.val))...)...)
		},
		func() []string { return c(g.pick("LPUSHX", "RPUSHX"), g.key(), g.val()) },
		func() []string { return c(g.pick("LPOP", "RPOP"), g.key()) },
		func() []string { return c(g.pick("LPOP", "RPOP"), g.key(), g.count()) },
		func() []string { return c("LLEN", g.key()) },
		func() []string { return c("LRANGE", g.key(), g.idx(), g.idx()) },
		func() []string { return c("LRANGE", g.key(), "0", "-1") },
		func() []string { return c("LINDEX", g.key(), g.idx()) },
		func() []string { return c("LSET", g.key(), g.idx(), g.val()) },
		func() []string { return c("LINSERT", g.key(), g.pick("BEFORE", "AFTER", "x"), g.val(), g.val()) },
		func() []string { return c("LREM", g.key(), g.pick("0", "1", "-1", "2", "-2", "x"), g.val()) },
		func() []string { return c("LTRIM", g.key(), g.idx(), g.idx()) },
		func() []string { return c("LPOS", g.key(), g.val()) },
		func() []string {
			return c("LPOS", g.key(), g.val(), "RANK", g.pick("1", "-1", "2", "0", "-2"), "COUNT", g.pick("0", "1", "2", "-1"), "MAXLEN", g.pick("0", "1", "5", "-1"))
		},
		func() []string {
			return c("LMOVE", g.key(), g.key(), g.pick("LEFT", "RIGHT", "UP"), g.pick("LEFT", "RIGHT"))
		},
		func() []string { return c("RPOPLPUSH", g.key(), g.key()) },
		func() []string { return c(g.pick("BLPOP", "BRPOP"), g.key(), g.key(), g.pick("0.01", "-1", "x")) },
		func() []string { return c("BLMOVE", g.key(), g.key(), "LEFT", "RIGHT", g.pick("0.01", "-1")) },

		// sets
		func() []string { return c("SADD", append([]string{g.key()}, g.many(4, one(g.member))...)...) },
		func() []string { return c("SREM", append([]string{g.key()}, g.many(3, one(g.member))...)...) },
		func() []string { return c("SMEMBERS", g.key()) },
		func() []string { return c("SISMEMBER", g.key(), g.member()) },
		func() []string { return c("SMISMEMBER", g.key(), g.member(), g.member()) },
		func() []string { return c("SCARD", g.key()) },
		func() []string { return c("SMOVE", g.key(), g.key(), g.member()) },
		func() []string { return c(g.pick("SINTER", "SUNION", "SDIFF"), keys(3)...) },
		func() []string {
			return c(g.pick("SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"), append([]string{g.key()}, keys(3)...)...)
		},
		func() []string {
			return c("SINTERCARD", append(numkeys(), g.pick("LIMIT", "LIMIT", "X"), g.pick("0", "1", "-1"))...)
		},
		func() []string { return c("SINTERCARD", numkeys()...) },
		func() []string { return c("SSCAN", g.key(), "0", "COUNT", "1000") },
		func() []string { return c("SPOP", g.key(), g.pick("0", "-1", "x", "100")) },

		// sorted sets
		func() []string {
			return c("ZADD", append([]string{g.key()}, g.many(3, func() []string { return []string{g.score(), g.member()} })...)...)
		},
		func() []string {
			opts := g.many(2, one(func() string { return g.pick("NX", "XX", "GT", "LT", "CH", "INCR") }))
			return c("ZADD", append(append([]string{g.key()}, opts...), g.score(), g.member())...)
		},
		func() []string { return c("ZREM", append([]string{g.key()}, g.many(3, one(g.member))...)...) },
		func() []string { return c("ZSCORE", g.key(), g.member()) },
		func() []string { return c("ZMSCORE", g.key(), g.member(), g.member()) },
		func() []string { return c("ZINCRBY", g.key(), g.score(), g.member()) },
		func() []string { return c("ZCARD", g.key()) },
		func() []string { return c("ZCOUNT", g.key(), g.bound(), g.bound()) },
		func() []string { return c(g.pick("ZRANK", "ZREVRANK"), g.key(), g.member()) },
		func() []string {
			args := []string{g.key(), g.idx(), g.idx()}
			if g.n(2) == 0 {
				args = append(args, "REV")
			}
			if g.n(2) == 0 {
				args = append(args, "WITHSCORES")
			}
			return c("ZRANGE", args...)
		},
		func() []string {
			args := []string{g.key(), g.bound(), g.bound(), "BYSCORE"}
			if g.n(2) == 0 {
				args = append(args, "REV")
			}
			if g.n(2) == 0 {
				args = append(args, "LIMIT", g.pick("0", "1", "-1"), g.pick("1", "2", "-1", "0"))
			}
			if g.n(2) == 0 {
				args = append(args, "WITHSCORES")
			}
			return c("ZRANGE", args...)
		},
		func() []string { return c("ZRANGE", g.key(), g.lex(), g.lex(), "BYLEX") },
		func() []string { return c("ZRANGESTORE", g.key(), g.key(), g.idx(), g.idx()) },
		func() []string { return c("ZREVRANGE", g.key(), g.idx(), g.idx(), "WITHSCORES") },
		func() []string { return c(g.pick("ZRANGEBYSCORE", "ZREVRANGEBYSCORE"), g.key(), g.bound(), g.bound()) },
		func() []string {
			return c("ZRANGEBYSCORE", g.key(), g.bound(), g.bound(), "WITHSCORES", "LIMIT", "0", "2")
		},
		func() []string { return c("ZRANGEBYLEX", g.key(), g.lex(), g.lex()) },
		func() []string { return c("ZLEXCOUNT", g.key(), g.lex(), g.lex()) },
		func() []string { return c(g.pick("ZPOPMIN", "ZPOPMAX"), g.key()) },
		func() []string { return c(g.pick("ZPOPMIN", "ZPOPMAX"), g.key(), g.count()) },
		func() []string { return c("ZREMRANGEBYRANK", g.key(), g.idx(), g.idx()) },
		func() []string { return c("ZREMRANGEBYSCORE", g.key(), g.bound(), g.bound()) },
		func() []string {
			args := append([]string{g.key()}, numkeys()...)
			if g.n(3) == 0 {
				args = append(args, "WEIGHTS", g.pick("1", "2", "x"), g.pick("0.5", "-1"))
			}
			if g.n(3) == 0 {
				args = append(args, "AGGREGATE", g.pick("SUM", "MIN", "MAX", "AVG"))
			}
			return c(g.pick("ZUNIONSTORE", "ZINTERSTORE"), args...)
		},
		func() []string { return c("ZSCAN", g.key(), "0", "COUNT", "1000") },

		// scripts
		func() []string { return c("EVAL", "return redis.call('get', KEYS[1])", "1", g.key()) },
		func() []string {
			return c("EVAL", "return redis.call('incrby', KEYS[1], ARGV[1])", "1", g.key(), g.idx())
		},
		func() []string {
			return c("EVAL", "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end", "1", g.key(), g.val())
		},
		func() []string { return c("EVAL", "return {1, 2.9, 'x', false, {ok='fine'}}", "0") },
		func() []string { return c("EVAL", "return redis.pcall('lpush', KEYS[1], 'v')", "1", g.key()) },
	}
	if !g.Deterministic {
		g.gens = append(g.gens,
			func() []string { return c("SPOP", g.key()) },
			func() []string { return c("SPOP", g.key(), g.count()) },
			func() []string { return c("SRANDMEMBER", g.key(), g.count()) },
			func() []string { return c("HRANDFIELD", g.key(), g.count(), "WITHVALUES") },
			func() []string { return c("RANDOMKEY") },
			func() []string { return c("OBJECT", g.pick("ENCODING", "REFCOUNT"), g.key()) },
			func() []string { return c("HSCAN", g.key(), "0", "COUNT", "1") },
			func() []string { return c("EVAL", "return math.random(1000)", "0") },
			func() []string {
				return c("EVAL", "redis.call('set', KEYS[1], tostring(math.random())) return redis.call('time')", "1", g.key())
			},
		)
	}
}

// String renders a command for a failure report, quoted as the
// differential test files quote arguments.
func String(args []string) string {
	s := ""
	for i, a := range args {
		if i > 0 {
			s += " "
		}
		q := strconv.Quote(a)
		if a != "" && q == `"`+a+`"` && !containsSpace(a) {
			s += a
		} else {
			s += q
		}
	}
	return s
}

func containsSpace(s string) bool {
	for _, c := range s {
		if c == ' ' {
			return true
		}
	}
	return false
}
