package kvdiff

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// EveryType holds the commands that build keys of every type and
// encoding Redis 7.0 has (strings, HyperLogLog and bitmap strings, small
// and big lists, intsets and hashtable sets, listpack and hashtable
// hashes, listpack and skiplist sorted sets, streams with consumer groups,
// pending entries and consumers), some with a TTL: the keys that the
// DUMP/RESTORE and import tests move between redis-server and kvorum.
func EveryType() [][]any {
	cmds := [][]any{
		{"SET", "str", "hello"},
		{"SET", "int", "-12345"},
		{"SET", "long", strings.Repeat("abcdefghij", 100)},
		{"SET", "ttl", "expires", "PX", "100000000"},
		{"PFADD", "hll", "a", "b", "c"},
		{"SETBIT", "bitmap", "1000", "1"},
		{"RPUSH", "list", "a", "1", "-2", strings.Repeat("x", 70)},
		{"SADD", "intset", "3", "1", "-2", "70000", "5000000000"},
		{"SADD", "set", "x", "y", "z"},
		{"HSET", "hash", "b", "2", "a", "1"},
		{"HSET", "hashlong", "f", strings.Repeat("v", 100)},
		{"ZADD", "zset", "1", "a", "2.5", "b", "-3", "c", "inf", "d"},
		{"ZADD", "zsetlong", "1", strings.Repeat("m", 100)},
		{"EXPIRE", "hash", "100000"},
	}
	bigList := []any{"RPUSH", "biglist"}
	bigInts := []any{"SADD", "bigintset"}
	bigSet := []any{"SADD", "bigset"}
	bigHash := []any{"HSET", "bighash"}
	bigZSet := []any{"ZADD", "bigzset"}
	for i := 0; i < 1000; i++ {
		bigList = append(bigList, strings.Repeat(strconv.Itoa(i), 10))
		bigInts = append(bigInts, strconv.Itoa(i*7))
		bigSet = append(bigSet, "m"+strconv.Itoa(i))
		bigHash = append(bigHash, "f"+strconv.Itoa(i), strconv.Itoa(i))
		bigZSet = append(bigZSet, strconv.Itoa(i%13), "m"+strconv.Itoa(i))
	}
	cmds = append(cmds, bigList, bigInts, bigSet, bigHash, bigZSet)
	for i := 1; i <= 250; i++ {
		cmds = append(cmds, []any{"XADD", "stream", fmt.Sprintf("%d-1", i), "f", strconv.Itoa(i), "g", "v"})
	}
	cmds = append(cmds,
		[]any{"XDEL", "stream", "3-1"},
		[]any{"XGROUP", "CREATE", "stream", "g1", "0"},
		[]any{"XGROUP", "CREATE", "stream", "g2", "$"},
		[]any{"XGROUP", "CREATE", "stream", "g3", "100-1", "ENTRIESREAD", "99"},
		[]any{"XREADGROUP", "GROUP", "g1", "alice", "COUNT", "5", "STREAMS", "stream", ">"},
		[]any{"XREADGROUP", "GROUP", "g1", "bob", "COUNT", "2", "STREAMS", "stream", ">"},
		[]any{"XACK", "stream", "g1", "2-1"},
		[]any{"XCLAIM", "stream", "g1", "bob", "0", "4-1"},
		[]any{"XGROUP", "CREATECONSUMER", "stream", "g2", "carol"},
		[]any{"XADD", "emptystream", "1-1", "f", "v"},
		[]any{"XDEL", "emptystream", "1-1"},
		[]any{"XGROUP", "CREATE", "emptystream", "g", "$"},
	)
	return cmds
}

// EveryTypeKeys are the keys EveryType builds.
func EveryTypeKeys() []string {
	return []string{"str", "int", "long", "ttl", "hll", "bitmap", "list", "intset", "set", "hash", "hashlong",
		"zset", "zsetlong", "biglist", "bigintset", "bigset", "bighash", "bigzset", "stream", "emptystream"}
}

// Fill runs EveryType's commands on c.
func Fill(ctx context.Context, c *redis.Client) error {
	for _, cmd := range EveryType() {
		if err := c.Do(ctx, cmd...).Err(); err != nil {
			return fmt.Errorf("%v: %w", cmd[:min(len(cmd), 4)], err)
		}
	}
	return nil
}

// Describe returns what commands say of key on c: its type, encoding,
// contents (sets and hashes sorted), expiry deadline, and for a stream
// XINFO STREAM FULL, XINFO GROUPS and each group's XPENDING summary. Two
// servers holding the same value describe it alike.
func Describe(ctx context.Context, c *redis.Client, key string) (string, error) {
	var out []string
	do := func(args ...any) (any, error) {
		v, err := c.Do(ctx, args...).Result()
		if err != nil && err != redis.Nil {
			return nil, fmt.Errorf("%v: %w", args, err)
		}
		out = append(out, fmt.Sprint(v))
		return v, nil
	}
	typ, err := c.Type(ctx, key).Result()
	if err != nil {
		return "", err
	}
	out = append(out, typ)
	for _, cmd := range [][]any{{"OBJECT", "ENCODING", key}, {"PEXPIRETIME", key}} {
		if _, err := do(cmd...); err != nil {
			return "", err
		}
	}
	sorted := func(args ...any) error {
		v, err := c.Do(ctx, args...).StringSlice()
		if err != nil {
			return fmt.Errorf("%v: %w", args, err)
		}
		sort.Strings(v)
		out = append(out, fmt.Sprint(v))
		return nil
	}
	switch typ {
	case "string":
		_, err = do("GET", key)
	case "list":
		_, err = do("LRANGE", key, 0, -1)
	case "set":
		err = sorted("SMEMBERS", key)
	case "hash":
		m, herr := c.HGetAll(ctx, key).Result()
		err = herr
		var pairs []string
		for k, v := range m {
			pairs = append(pairs, k+"="+v)
		}
		sort.Strings(pairs)
		out = append(out, fmt.Sprint(pairs))
	case "zset":
		_, err = do("ZRANGE", key, 0, -1, "WITHSCORES")
	case "stream":
		if _, err = do("XINFO", "STREAM", key, "FULL"); err != nil {
			return "", err
		}
		groups, gerr := c.XInfoGroups(ctx, key).Result()
		if gerr != nil {
			return "", gerr
		}
		out = append(out, fmt.Sprint(groups))
		for _, g := range groups {
			if _, err = do("XPENDING", key, g.Name); err != nil {
				return "", err
			}
		}
	}
	if err != nil {
		return "", err
	}
	return strings.Join(out, "\n"), nil
}

// Move copies key from one server to another with DUMP and RESTORE (its
// deadline kept with ABSTTL), as a migration tool would.
func Move(ctx context.Context, from, to *redis.Client, key string, replace bool) error {
	payload, err := from.Dump(ctx, key).Result()
	if err != nil {
		return fmt.Errorf("DUMP %s: %w", key, err)
	}
	deadline, err := from.Do(ctx, "PEXPIRETIME", key).Int64()
	if err != nil {
		return err
	}
	args := []any{"RESTORE", key, 0, payload}
	if deadline > 0 {
		args = []any{"RESTORE", key, deadline, payload, "ABSTTL"}
	}
	if replace {
		args = append(args, "REPLACE")
	}
	if err := to.Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("RESTORE %s: %w", key, err)
	}
	return nil
}
