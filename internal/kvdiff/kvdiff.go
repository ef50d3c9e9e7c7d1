package kvdiff

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/reply"
)

// SplitArgs splits a line into arguments: spaces separate, double quotes
// group, and inside quotes \" \\ \n \r \t \0 are escapes.
func SplitArgs(line string) ([]string, error) {
	var args []string
	var cur strings.Builder
	inQ, have := false, false
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case inQ && ch == '\\' && i+1 < len(line):
			i++
			switch line[i] {
			case 'n':
				cur.WriteByte('\n')
			case 'r':
				cur.WriteByte('\r')
			case 't':
				cur.WriteByte('\t')
			case '0':
				cur.WriteByte(0)
			default:
				cur.WriteByte(line[i])
			}
		case ch == '"':
			inQ, have = !inQ, true
		case !inQ && (ch == ' ' || ch == '\t'):
			if have {
				args = append(args, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteByte(ch)
			have = true
		}
	}
	if inQ {
		return nil, errors.New("unbalanced quotes")
	}
	if have {
		args = append(args, cur.String())
	}
	return args, nil
}

// Normalize turns a go-redis reply into a comparable value: "<nil>", int64,
// string, "ERR:<text>" for errors, []any for arrays; arrays of commands
// whose order Redis leaves unspecified are sorted.
func Normalize(cmd string, v any, err error) any {
	if err != nil {
		if errors.Is(err, redis.Nil) {
			return "<nil>"
		}
		return "ERR:" + err.Error()
	}
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = Normalize("", x[i], nil)
		}
		return SortUnordered(cmd, out)
	case nil:
		return "<nil>"
	case redis.Error:
		return "ERR:" + x.Error()
	}
	return v
}

// SortUnordered puts replies whose order Redis does not define into a
// canonical order: KEYS, a SCAN page's keys, set members (SMEMBERS, SINTER,
// SUNION, SDIFF, the members of SSCAN), hash fields and values (HKEYS,
// HVALS) and the field/value pairs of HGETALL and HSCAN (sorted by field).
// Redis returns small collections in insertion order and kvorum in byte
// order; both are allowed, so the comparison must not see it.
func SortUnordered(cmd string, out []any) []any {
	byStr := func(s []any) {
		sort.Slice(s, func(i, j int) bool { return fmt.Sprint(s[i]) < fmt.Sprint(s[j]) })
	}
	byPair := func(s []any) {
		if len(s)%2 != 0 {
			return
		}
		pairs := make([][2]any, len(s)/2)
		for i := range pairs {
			pairs[i] = [2]any{s[2*i], s[2*i+1]}
		}
		sort.SliceStable(pairs, func(i, j int) bool { return fmt.Sprint(pairs[i][0]) < fmt.Sprint(pairs[j][0]) })
		for i, p := range pairs {
			s[2*i], s[2*i+1] = p[0], p[1]
		}
	}
	page := func(f func([]any)) {
		if len(out) == 2 {
			if keys, ok := out[1].([]any); ok {
				f(keys)
			}
		}
	}
	switch cmd {
	case "KEYS", "SMEMBERS", "SINTER", "SUNION", "SDIFF", "HKEYS", "HVALS", "SPOP":
		byStr(out)
	case "HGETALL":
		byPair(out)
	case "SCAN", "SSCAN":
		page(byStr)
	case "HSCAN":
		page(byPair)
	}
	return out
}

// StartRedis starts a private redis-server (no persistence) on a free
// loopback port and returns a go-redis client (RESP2) for it; the server is
// killed when the test ends. A missing redis-server fails the test with
// what to install.
func StartRedis(t testing.TB) *redis.Client {
	t.Helper()
	cl := redis.NewClient(&redis.Options{Addr: startServer(t), Protocol: 2})
	t.Cleanup(func() { cl.Close() })
	return cl
}

// NormalizeReply is Normalize for a reply.Reply as a RESP2 client reads
// it: "<nil>", int64, string, "ERR:<text>", []any; cmd says which
// unordered replies to sort (SortUnordered).
func NormalizeReply(cmd string, r reply.Reply) any {
	switch r.Kind {
	case reply.KindNil, reply.KindNilArray:
		return "<nil>"
	case reply.KindError:
		return "ERR:" + string(r.Str)
	case reply.KindInt, reply.KindBool:
		return r.Int
	case reply.KindStatus, reply.KindBulk, reply.KindVerbatim:
		return string(r.Str)
	case reply.KindDouble:
		if len(r.Str) > 0 {
			return string(r.Str) // the text the writer sends
		}
		return string(redisnum.AppendDouble(nil, r.Float)) // what RESP2 carries
	case reply.KindNestedMap: // RESP2: [key, value] arrays
		out := make([]any, 0, len(r.Elems)/2)
		for i := 0; i+1 < len(r.Elems); i += 2 {
			out = append(out, []any{NormalizeReply("", r.Elems[i]), NormalizeReply("", r.Elems[i+1])})
		}
		return out
	case reply.KindArray, reply.KindSet, reply.KindMap, reply.KindPairs: // RESP2: flat
		out := make([]any, len(r.Elems))
		for i := range r.Elems {
			out[i] = NormalizeReply("", r.Elems[i])
		}
		return SortUnordered(cmd, out)
	}
	return fmt.Sprintf("<kind %d>", r.Kind)
}
