package process

// Client smoke suites: real Redis clients (go-redis v9 here, redis-py via
// testdata/redis_py_smoke.py), used the way applications use them, against
// a 3-node kvorum cluster of real processes. Every family of commands is
// exercised, plus failover: kill -9 of the node a client is connected to.
//
// The same families also run against a plain redis-server
// (TestClientSmokeReferenceRedisServer) so that every expected value in
// here is checked to be what Redis itself answers.

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// pythonWithRedis is the interpreter the redis-py suite runs with: Debian's
// python3 with the python3-redis package (4.3.4), not a pyenv python on PATH.
const pythonWithRedis = "/usr/bin/python3"

// smoke is what the client families run against: one client per node.
// a and c speak RESP3 (go-redis's default), b speaks RESP2, so every
// family crosses protocols as well as nodes. In the reference run all
// three talk to one redis-server.
type smoke struct {
	a, b, c *redis.Client
}

func (s *smoke) all() []*redis.Client { return []*redis.Client{s.a, s.b, s.c} }

func (s *smoke) close() {
	for _, cl := range s.all() {
		cl.Close()
	}
}

// smokeClient is a go-redis client as an application would configure it,
// except that it never retries by itself (MaxRetries -1): a retry could
// hide an error and apply a non-idempotent command twice.
func smokeClient(addr string, protocol int) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, Protocol: protocol, MaxRetries: -1,
		DialTimeout: 2 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 5 * time.Second})
}

type smokeFamily struct {
	name string
	run  func(t *testing.T, s *smoke)
}

var smokeFamilies = []smokeFamily{
	{"strings", smokeStrings},
	{"expiry", smokeExpiry},
	{"keyspace", smokeKeyspace},
	{"hashes", smokeHashes},
	{"lists", smokeLists},
	{"sets", smokeSets},
	{"sortedsets", smokeSortedSets},
	{"leaderboard", smokeLeaderboard},
	{"pipeline", smokePipeline},
	{"transactions", smokeTransactions},
	{"watch", smokeWatch},
	{"scripts", smokeScripts},
	{"pubsub", smokePubSub},
}

func runSmokeFamilies(t *testing.T, s *smoke) {
	for _, f := range smokeFamilies {
		t.Run(f.name, func(t *testing.T) {
			start := time.Now()
			f.run(t, s)
			t.Logf("%s: %v", f.name, time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestGoRedisSmoke runs go-redis v9 against a 3-node cluster of kvorum
// processes: every command family, then reconnects after kill -9.
func TestGoRedisSmoke(t *testing.T) {
	c := newCluster(t, 3)
	c.waitLeader()
	s := &smoke{a: smokeClient(c.procs[0].client, 3), b: smokeClient(c.procs[1].client, 2),
		c: smokeClient(c.procs[2].client, 3)}
	defer s.close()
	runSmokeFamilies(t, s)
	t.Run("reconnect", func(t *testing.T) { smokeReconnect(t, c) })
}

// TestClientSmokeReferenceRedisServer runs the same families and the
// redis-py suite against one redis-server, proving that what the smoke
// tests expect is what Redis answers. Fails without redis-server (make
// test installs it).
func TestClientSmokeReferenceRedisServer(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server not found: apt-get install redis-server (make test does this)")
	}
	addr := freePort(t, "127.0.0.1")
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	s := &smoke{a: smokeClient(addr, 3), b: smokeClient(addr, 2), c: smokeClient(addr, 3)}
	defer s.close()
	deadline := time.Now().Add(10 * time.Second)
	for s.a.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not answer PING within 10s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	runSmokeFamilies(t, s)
	t.Run("redis-py", func(t *testing.T) {
		requireRedisPy(t)
		runRedisPy(t, []string{addr, addr, addr}, nil)
	})
}

// ---- assertion helpers ----

// result is any go-redis command with a typed value.
type result[T any] interface {
	Result() (T, error)
	Args() []interface{}
}

func cmdline(args []interface{}) string {
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = fmt.Sprint(a)
	}
	return strings.Join(parts, " ")
}

// want checks that cmd succeeded with exactly exp.
func want[T any](t *testing.T, cmd result[T], exp T) bool {
	t.Helper()
	got, err := cmd.Result()
	if err != nil {
		t.Errorf("%s: error %q, want %#v", cmdline(cmd.Args()), err, exp)
		return false
	}
	if !reflect.DeepEqual(got, exp) {
		t.Errorf("%s: got %#v, want %#v", cmdline(cmd.Args()), got, exp)
		return false
	}
	return true
}

// wantSorted checks a multi-bulk reply whose order Redis leaves unspecified.
func wantSorted(t *testing.T, cmd *redis.StringSliceCmd, exp ...string) {
	t.Helper()
	got, err := cmd.Result()
	if err != nil {
		t.Errorf("%s: error %q, want %q", cmdline(cmd.Args()), err, exp)
		return
	}
	got = slices.Clone(got)
	sort.Strings(got)
	exp = slices.Clone(exp)
	sort.Strings(exp)
	if !slices.Equal(got, exp) {
		t.Errorf("%s: got %q, want %q (any order)", cmdline(cmd.Args()), got, exp)
	}
}

type errCmd interface {
	Err() error
	Args() []interface{}
}

// wantErr checks that cmd failed with an error reply starting with prefix.
func wantErr(t *testing.T, cmd errCmd, prefix string) {
	t.Helper()
	err := cmd.Err()
	if err == nil || errors.Is(err, redis.Nil) || !strings.HasPrefix(err.Error(), prefix) {
		t.Errorf("%s: error %v, want an error starting with %q", cmdline(cmd.Args()), err, prefix)
	}
}

// wantNil checks that cmd got a null reply (redis.Nil).
func wantNil(t *testing.T, cmd errCmd) {
	t.Helper()
	if err := cmd.Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("%s: error %v, want a null reply (redis.Nil)", cmdline(cmd.Args()), err)
	}
}

// wantDuration checks a TTL-like reply within [lo, hi].
func wantDuration(t *testing.T, cmd *redis.DurationCmd, lo, hi time.Duration) {
	t.Helper()
	got, err := cmd.Result()
	if err != nil || got < lo || got > hi {
		t.Errorf("%s: got %v (err %v), want within [%v, %v]", cmdline(cmd.Args()), got, err, lo, hi)
	}
}

// scanAll drains a SCAN-family iterator (bounded).
func scanAll(t *testing.T, it *redis.ScanIterator) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for i := 0; it.Next(ctx); i++ {
		if i > 100000 {
			t.Fatal("SCAN iterator did not finish after 100000 items")
		}
		out = append(out, it.Val())
	}
	if err := it.Err(); err != nil {
		t.Errorf("SCAN iterator: %v", err)
	}
	return out
}

// requireCommands stops a family with one clear line when the server does
// not know some of the commands it uses (COMMAND INFO answers null).
func requireCommands(t *testing.T, cl *redis.Client, names ...string) {
	t.Helper()
	args := []interface{}{"command", "info"}
	for _, n := range names {
		args = append(args, n)
	}
	v, err := cl.Do(context.Background(), args...).Slice()
	if err != nil {
		t.Fatalf("COMMAND INFO: %v", err)
	}
	var missing []string
	for i, info := range v {
		if info == nil && i < len(names) {
			missing = append(missing, strings.ToUpper(names[i]))
		}
	}
	if len(missing) > 0 {
		t.Fatalf("server lacks commands this family uses: %s", strings.Join(missing, " "))
	}
}

// ---- families ----

func smokeStrings(t *testing.T, s *smoke) {
	ctx := context.Background()
	want(t, s.b.Set(ctx, "str:a", "hello", 0), "OK")
	want(t, s.c.Get(ctx, "str:a"), "hello") // written through node 2, read on node 3
	want(t, s.a.Get(ctx, "str:a"), "hello")
	wantNil(t, s.c.Get(ctx, "str:missing"))
	want(t, s.b.SetNX(ctx, "str:a", "x", 0), false)
	want(t, s.b.SetXX(ctx, "str:nx", "x", 0), false)
	want(t, s.c.Exists(ctx, "str:nx"), 0)
	want(t, s.b.SetArgs(ctx, "str:a", "world", redis.SetArgs{Get: true}), "hello")
	want(t, s.b.Append(ctx, "str:a", "!"), 6)
	want(t, s.b.StrLen(ctx, "str:a"), 6)
	want(t, s.b.GetRange(ctx, "str:a", 1, 3), "orl")
	want(t, s.b.SetRange(ctx, "str:a", 5, "?"), 6)
	want(t, s.c.Get(ctx, "str:a"), "world?")
	want(t, s.b.MSet(ctx, "str:m1", "1", "str:m2", "2"), "OK")
	want(t, s.c.MGet(ctx, "str:m1", "str:nope", "str:m2"), []interface{}{"1", nil, "2"})
	want(t, s.b.MSetNX(ctx, "str:m2", "x", "str:m3", "3"), false)
	want(t, s.c.Exists(ctx, "str:m3"), 0)
	want(t, s.b.MSetNX(ctx, "str:m3", "3", "str:m4", "4"), true)
	want(t, s.c.MGet(ctx, "str:m3", "str:m4"), []interface{}{"3", "4"})
	want(t, s.b.Incr(ctx, "str:n"), 1)
	want(t, s.b.IncrBy(ctx, "str:n", 41), 42)
	want(t, s.a.Decr(ctx, "str:n"), 41)
	want(t, s.a.DecrBy(ctx, "str:n", 40), 1)
	want(t, s.b.IncrByFloat(ctx, "str:f", 1.5), 1.5)
	want(t, s.c.IncrByFloat(ctx, "str:f", 0.25), 1.75)
	want(t, s.a.Get(ctx, "str:f"), "1.75")
	wantErr(t, s.b.Incr(ctx, "str:a"), "ERR value is not an integer or out of range")
	want(t, s.b.GetSet(ctx, "str:n", "100"), "1")
	want(t, s.b.GetDel(ctx, "str:n"), "100")
	want(t, s.c.Exists(ctx, "str:n"), 0)
	wantNil(t, s.b.GetDel(ctx, "str:n"))
	bin := string([]byte{0, 1, 2, 0xff, '\r', '\n', 'x'})
	want(t, s.b.Set(ctx, "str:bin\x00key", bin, 0), "OK")
	want(t, s.a.Get(ctx, "str:bin\x00key"), bin)
	big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	want(t, s.a.Set(ctx, "str:big", big, 0), "OK")
	want(t, s.c.StrLen(ctx, "str:big"), int64(len(big)))
	if got, err := s.b.Get(ctx, "str:big").Result(); err != nil || got != big {
		t.Errorf("GET str:big: %d bytes, err %v; want the 1 MiB value back", len(got), err)
	}
}

func smokeExpiry(t *testing.T, s *smoke) {
	ctx := context.Background()
	want(t, s.a.Set(ctx, "exp:a", "v", 100*time.Second), "OK")
	wantDuration(t, s.b.TTL(ctx, "exp:a"), 98*time.Second, 100*time.Second)
	wantDuration(t, s.c.PTTL(ctx, "exp:a"), 98*time.Second, 100*time.Second)
	want(t, s.a.TTL(ctx, "exp:missing"), time.Duration(-2))
	want(t, s.a.Persist(ctx, "exp:a"), true)
	want(t, s.b.TTL(ctx, "exp:a"), time.Duration(-1))
	want(t, s.a.Persist(ctx, "exp:a"), false)
	want(t, s.a.PExpire(ctx, "exp:a", 500*time.Millisecond), true)
	wantDuration(t, s.c.PTTL(ctx, "exp:a"), time.Millisecond, 500*time.Millisecond)
	time.Sleep(800 * time.Millisecond)
	for _, cl := range s.all() {
		wantNil(t, cl.Get(ctx, "exp:a"))
		want(t, cl.Exists(ctx, "exp:a"), 0)
		want(t, cl.TTL(ctx, "exp:a"), time.Duration(-2))
	}
	want(t, s.a.SetEx(ctx, "exp:b", "v", 50*time.Second), "OK")
	wantDuration(t, s.b.TTL(ctx, "exp:b"), 48*time.Second, 50*time.Second)
	// KEEPTTL keeps the deadline; a plain SET clears it.
	want(t, s.a.SetArgs(ctx, "exp:b", "w", redis.SetArgs{KeepTTL: true}), "OK")
	wantDuration(t, s.b.TTL(ctx, "exp:b"), 48*time.Second, 50*time.Second)
	want(t, s.c.Get(ctx, "exp:b"), "w")
	want(t, s.a.Set(ctx, "exp:b", "x", 0), "OK")
	want(t, s.b.TTL(ctx, "exp:b"), time.Duration(-1))
	// EXPIRE NX / XX / GT / LT
	want(t, s.a.ExpireXX(ctx, "exp:b", 10*time.Second), false)
	want(t, s.a.ExpireNX(ctx, "exp:b", 10*time.Second), true)
	want(t, s.a.ExpireNX(ctx, "exp:b", 20*time.Second), false)
	want(t, s.a.ExpireGT(ctx, "exp:b", 5*time.Second), false)
	want(t, s.a.ExpireGT(ctx, "exp:b", 50*time.Second), true)
	want(t, s.a.ExpireLT(ctx, "exp:b", 100*time.Second), false)
	want(t, s.a.ExpireLT(ctx, "exp:b", 30*time.Second), true)
	wantDuration(t, s.c.TTL(ctx, "exp:b"), 28*time.Second, 30*time.Second)
	want(t, s.a.ExpireXX(ctx, "exp:b", 40*time.Second), true)
	wantDuration(t, s.c.TTL(ctx, "exp:b"), 38*time.Second, 40*time.Second)
	if et, err := s.b.ExpireTime(ctx, "exp:b").Result(); err != nil ||
		et < time.Duration(time.Now().Unix()+35)*time.Second || et > time.Duration(time.Now().Unix()+45)*time.Second {
		t.Errorf("EXPIRETIME exp:b: got %v (err %v), want about now+40s = %v", et, err, time.Now().Unix()+40)
	}
	// GETEX sets a TTL and returns the value.
	want(t, s.a.GetEx(ctx, "exp:b", 10*time.Second), "x")
	wantDuration(t, s.b.TTL(ctx, "exp:b"), 8*time.Second, 10*time.Second)
	// An EXPIREAT in the past deletes at once.
	want(t, s.a.ExpireAt(ctx, "exp:b", time.Now().Add(-time.Hour)), true)
	want(t, s.c.Exists(ctx, "exp:b"), 0)
	want(t, s.a.Expire(ctx, "exp:missing", time.Second), false)
}

func smokeKeyspace(t *testing.T, s *smoke) {
	ctx := context.Background()
	requireCommands(t, s.a, "hset", "hgetall", "sadd", "smembers", "zadd", "type", "scan", "keys", "rename", "renamenx", "expire", "pexpire", "exists", "del", "unlink")
	want(t, s.c.Set(ctx, "ks:str", "v", 0), "OK")
	want(t, s.c.HSet(ctx, "ks:hash", "f", "v"), 1)
	want(t, s.c.RPush(ctx, "ks:list", "a", "b"), 2)
	want(t, s.c.SAdd(ctx, "ks:set", "x"), 1)
	want(t, s.c.ZAdd(ctx, "ks:zset", redis.Z{Score: 1, Member: "m"}), 1)
	types := map[string]string{"ks:str": "string", "ks:hash": "hash", "ks:list": "list", "ks:set": "set", "ks:zset": "zset"}
	for key, typ := range types {
		want(t, s.a.Type(ctx, key), typ)
		got := scanAll(t, s.b.ScanType(ctx, 0, "ks:*", 3, typ).Iterator())
		if !slices.Equal(got, []string{key}) {
			t.Errorf("SCAN 0 MATCH ks:* COUNT 3 TYPE %s: got %q, want [%s]", typ, got, key)
		}
	}
	want(t, s.a.Type(ctx, "ks:none"), "none")
	all := scanAll(t, s.a.Scan(ctx, 0, "ks:*", 2).Iterator())
	sort.Strings(all)
	if exp := []string{"ks:hash", "ks:list", "ks:set", "ks:str", "ks:zset"}; !slices.Equal(all, exp) {
		t.Errorf("SCAN MATCH ks:*: got %q, want %q", all, exp)
	}
	wantSorted(t, s.b.Keys(ctx, "ks:*s*"), "ks:hash", "ks:list", "ks:set", "ks:str", "ks:zset")

	// WRONGTYPE across types.
	wantErr(t, s.a.Get(ctx, "ks:hash"), "WRONGTYPE")
	wantErr(t, s.a.LPush(ctx, "ks:hash", "x"), "WRONGTYPE")
	wantErr(t, s.a.HGet(ctx, "ks:list", "f"), "WRONGTYPE")
	wantErr(t, s.a.SAdd(ctx, "ks:zset", "x"), "WRONGTYPE")
	wantErr(t, s.a.ZAdd(ctx, "ks:set", redis.Z{Score: 1, Member: "x"}), "WRONGTYPE")
	wantErr(t, s.a.Incr(ctx, "ks:list"), "WRONGTYPE")

	// RENAME moves a collection, and overwrites a key of another type.
	want(t, s.a.Rename(ctx, "ks:hash", "ks:hash2"), "OK")
	want(t, s.b.HGetAll(ctx, "ks:hash2"), map[string]string{"f": "v"})
	want(t, s.b.Exists(ctx, "ks:hash"), 0)
	want(t, s.a.Rename(ctx, "ks:list", "ks:str"), "OK")
	want(t, s.b.Type(ctx, "ks:str"), "list")
	want(t, s.c.LRange(ctx, "ks:str", 0, -1), []string{"a", "b"})
	want(t, s.a.RenameNX(ctx, "ks:str", "ks:set"), false)
	wantErr(t, s.a.Rename(ctx, "ks:nope", "ks:x"), "ERR no such key")

	// EXPIRE on collections.
	want(t, s.a.Expire(ctx, "ks:set", 100*time.Second), true)
	wantDuration(t, s.b.TTL(ctx, "ks:set"), 98*time.Second, 100*time.Second)
	want(t, s.a.PExpire(ctx, "ks:hash2", 300*time.Millisecond), true)
	time.Sleep(600 * time.Millisecond)
	want(t, s.c.Exists(ctx, "ks:hash2"), 0)
	want(t, s.c.HGetAll(ctx, "ks:hash2"), map[string]string{})
	want(t, s.a.HSet(ctx, "ks:hash2", "new", "1"), 1) // a fresh hash: no field survives expiry
	want(t, s.b.HGetAll(ctx, "ks:hash2"), map[string]string{"new": "1"})

	// DEL / EXISTS with several keys, of several types.
	want(t, s.b.Exists(ctx, "ks:set", "ks:zset", "ks:nope", "ks:set"), 3)
	want(t, s.a.Del(ctx, "ks:set", "ks:zset", "ks:nope"), 2)
	want(t, s.b.Exists(ctx, "ks:set", "ks:zset"), 0)
	want(t, s.b.Type(ctx, "ks:set"), "none")
	want(t, s.a.SAdd(ctx, "ks:zset", "only"), 1) // recreated with another type: nothing left over
	wantSorted(t, s.c.SMembers(ctx, "ks:zset"), "only")
	want(t, s.a.Unlink(ctx, "ks:zset", "ks:str"), 2)

	// SCAN sees every key exactly once over many pages.
	pipe := s.a.Pipeline()
	for i := 0; i < 120; i++ {
		pipe.Set(ctx, fmt.Sprintf("ks:many:%03d", i), i, 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("pipelined SETs: %v", err)
	}
	seen := map[string]bool{}
	for _, k := range scanAll(t, s.c.Scan(ctx, 0, "ks:many:*", 10).Iterator()) {
		seen[k] = true
	}
	if len(seen) != 120 {
		t.Errorf("SCAN MATCH ks:many:* COUNT 10: %d distinct keys, want 120", len(seen))
	}
}

func smokeHashes(t *testing.T, s *smoke) {
	ctx := context.Background()
	requireCommands(t, s.a, "hset", "hget", "hgetall", "hincrby", "hincrbyfloat", "hmget", "hsetnx", "hlen", "hexists", "hstrlen", "hdel", "hkeys", "hvals", "hscan")
	want(t, s.a.HSet(ctx, "h:user", "name", "ada", "lang", "go", "visits", "1"), 3)
	want(t, s.a.HSet(ctx, "h:user", "lang", "lua", "city", "paris"), 1)
	want(t, s.b.HGet(ctx, "h:user", "lang"), "lua")
	wantNil(t, s.b.HGet(ctx, "h:user", "nope"))
	wantNil(t, s.b.HGet(ctx, "h:none", "nope"))
	want(t, s.b.HGetAll(ctx, "h:user"), map[string]string{"name": "ada", "lang": "lua", "visits": "1", "city": "paris"})
	want(t, s.c.HGetAll(ctx, "h:user"), map[string]string{"name": "ada", "lang": "lua", "visits": "1", "city": "paris"})
	want(t, s.c.HGetAll(ctx, "h:none"), map[string]string{})
	want(t, s.a.HIncrBy(ctx, "h:user", "visits", 41), 42)
	want(t, s.a.HIncrBy(ctx, "h:user", "new", -3), -3)
	want(t, s.a.HIncrByFloat(ctx, "h:user", "score", 2.5), 2.5)
	want(t, s.c.HIncrByFloat(ctx, "h:user", "score", 0.25), 2.75)
	wantErr(t, s.a.HIncrBy(ctx, "h:user", "name", 1), "ERR hash value is not an integer")
	want(t, s.b.HMGet(ctx, "h:user", "name", "nope", "visits"), []interface{}{"ada", nil, "42"})
	want(t, s.a.HSetNX(ctx, "h:user", "name", "bob"), false)
	want(t, s.a.HSetNX(ctx, "h:user", "nick", "a"), true)
	want(t, s.b.HLen(ctx, "h:user"), 7)
	want(t, s.b.HExists(ctx, "h:user", "nick"), true)
	want(t, s.b.HExists(ctx, "h:user", "nope"), false)
	want(t, s.b.HStrLen(ctx, "h:user", "city"), 5)
	want(t, s.a.HDel(ctx, "h:user", "city", "nope", "new", "score"), 3)
	wantSorted(t, s.c.HKeys(ctx, "h:user"), "name", "lang", "visits", "nick")
	wantSorted(t, s.c.HVals(ctx, "h:user"), "ada", "lua", "42", "a")
	want(t, s.a.HDel(ctx, "h:user", "name", "lang", "visits", "nick"), 4)
	want(t, s.b.Exists(ctx, "h:user"), 0) // an emptied hash is deleted

	// HSCAN over 300 fields, whole and with MATCH.
	args := []interface{}{}
	exp := map[string]string{}
	for i := 0; i < 300; i++ {
		f, v := fmt.Sprintf("f%d", i), fmt.Sprintf("v%d", i*i)
		args = append(args, f, v)
		exp[f] = v
	}
	want(t, s.a.HSet(ctx, "h:big", args...), 300)
	kv := scanAll(t, s.b.HScan(ctx, "h:big", 0, "", 50).Iterator())
	got := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		got[kv[i]] = kv[i+1]
	}
	if len(kv)%2 != 0 || !reflect.DeepEqual(got, exp) {
		t.Errorf("HSCAN h:big: %d items, %d distinct fields; want the 300 fields with their values", len(kv), len(got))
	}
	kv = scanAll(t, s.c.HScan(ctx, "h:big", 0, "f1*", 20).Iterator())
	fields := map[string]bool{}
	for i := 0; i+1 < len(kv); i += 2 {
		if !strings.HasPrefix(kv[i], "f1") || kv[i+1] != exp[kv[i]] {
			t.Errorf("HSCAN h:big MATCH f1*: unexpected pair %q=%q", kv[i], kv[i+1])
		}
		fields[kv[i]] = true
	}
	if len(fields) != 111 { // f1, f10..f19, f100..f199
		t.Errorf("HSCAN h:big MATCH f1*: %d distinct fields, want 111", len(fields))
	}
}

func smokeLists(t *testing.T, s *smoke) {
	ctx := context.Background()
	requireCommands(t, s.a, "rpush", "lpush", "lrange", "llen", "lpop", "rpushx", "lindex", "linsert", "lrem", "lset", "lpos", "lmove", "rpoplpush", "ltrim", "rpop", "blpop")
	want(t, s.a.RPush(ctx, "l:a", "b", "c"), 2)
	want(t, s.a.LPush(ctx, "l:a", "a", "z"), 4)
	want(t, s.b.LRange(ctx, "l:a", 0, -1), []string{"z", "a", "b", "c"})
	want(t, s.b.LLen(ctx, "l:a"), 4)
	want(t, s.a.LPop(ctx, "l:a"), "z")
	want(t, s.a.RPushX(ctx, "l:none", "x"), 0)
	want(t, s.c.Exists(ctx, "l:none"), 0)
	want(t, s.c.LIndex(ctx, "l:a", -1), "c")
	wantNil(t, s.c.LIndex(ctx, "l:a", 10))
	want(t, s.a.LInsertBefore(ctx, "l:a", "b", "ab"), 4)
	want(t, s.a.LInsertAfter(ctx, "l:a", "c", "d"), 5)
	want(t, s.a.LInsert(ctx, "l:a", "before", "nope", "x"), -1)
	want(t, s.a.RPush(ctx, "l:a", "b", "x", "b"), 8)
	want(t, s.c.LRange(ctx, "l:a", 0, -1), []string{"a", "ab", "b", "c", "d", "b", "x", "b"})
	want(t, s.a.LRem(ctx, "l:a", 2, "b"), 2)
	want(t, s.b.LRange(ctx, "l:a", 0, -1), []string{"a", "ab", "c", "d", "x", "b"})
	want(t, s.a.LRem(ctx, "l:a", -1, "b"), 1)
	want(t, s.a.LSet(ctx, "l:a", 1, "AB"), "OK")
	wantErr(t, s.a.LSet(ctx, "l:a", 99, "x"), "ERR index out of range")
	want(t, s.a.LPos(ctx, "l:a", "x", redis.LPosArgs{}), 4)
	want(t, s.a.LPopCount(ctx, "l:a", 2), []string{"a", "AB"})
	want(t, s.b.LRange(ctx, "l:a", 0, -1), []string{"c", "d", "x"})
	want(t, s.a.LMove(ctx, "l:a", "l:b", "LEFT", "RIGHT"), "c")
	want(t, s.a.LMove(ctx, "l:a", "l:b", "RIGHT", "LEFT"), "x")
	want(t, s.c.LRange(ctx, "l:b", 0, -1), []string{"x", "c"})
	want(t, s.c.LRange(ctx, "l:a", 0, -1), []string{"d"})
	want(t, s.a.RPopLPush(ctx, "l:b", "l:a"), "c")
	want(t, s.b.LRange(ctx, "l:a", 0, -1), []string{"c", "d"})
	want(t, s.a.RPush(ctx, "l:a", "e", "f", "g"), 5)
	want(t, s.a.LTrim(ctx, "l:a", 1, -2), "OK")
	want(t, s.b.LRange(ctx, "l:a", 0, -1), []string{"d", "e", "f"})
	want(t, s.a.RPopCount(ctx, "l:a", 5), []string{"f", "e", "d"})
	want(t, s.b.Exists(ctx, "l:a"), 0) // an emptied list is deleted
	wantNil(t, s.a.LPop(ctx, "l:a"))
	wantNil(t, s.a.LPopCount(ctx, "l:a", 2))
	want(t, s.a.Set(ctx, "l:str", "v", 0), "OK")
	wantErr(t, s.a.RPush(ctx, "l:str", "x"), "WRONGTYPE")

	// BLPOP blocked on node 1, woken by an RPUSH on node 2.
	type popped struct {
		val []string
		err error
		at  time.Time
	}
	done := make(chan popped, 1)
	go func() {
		v, err := s.a.BLPop(ctx, 10*time.Second, "l:block1", "l:block2").Result()
		done <- popped{v, err, time.Now()}
	}()
	select {
	case r := <-done:
		t.Fatalf("BLPOP l:block1 l:block2 returned %q, %v before anything was pushed", r.val, r.err)
	case <-time.After(500 * time.Millisecond):
	}
	pushed := time.Now()
	want(t, s.b.RPush(ctx, "l:block2", "wake", "more"), 2)
	select {
	case r := <-done:
		if r.err != nil || !slices.Equal(r.val, []string{"l:block2", "wake"}) {
			t.Errorf("BLPOP woken by RPUSH on another node: got %q, %v; want [l:block2 wake]", r.val, r.err)
		}
		t.Logf("BLPOP woke %v after the RPUSH was sent", r.at.Sub(pushed).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("BLPOP on node 1 not woken within 5s by RPUSH on node 2")
	}
	want(t, s.c.LRange(ctx, "l:block2", 0, -1), []string{"more"})
	// Data already there: no blocking.
	want(t, s.c.BLPop(ctx, time.Second, "l:block1", "l:block2"), []string{"l:block2", "more"})
	// Timeout: a null reply after about the timeout.
	start := time.Now()
	wantNil(t, s.b.BLPop(ctx, time.Second, "l:never"))
	if el := time.Since(start); el < 900*time.Millisecond || el > 3*time.Second {
		t.Errorf("BLPOP l:never 1: returned after %v, want about 1s", el)
	}
}

func smokeSets(t *testing.T, s *smoke) {
	ctx := context.Background()
	requireCommands(t, s.a, "sadd", "smembers", "sismember", "smismember", "scard", "sinter", "sunion", "sdiff", "sunionstore", "sinterstore", "sdiffstore", "srem", "smove", "spop", "srandmember", "sscan")
	want(t, s.c.SAdd(ctx, "s:a", "x", "y", "z", "x"), 3)
	want(t, s.c.SAdd(ctx, "s:b", "y", "z", "w"), 3)
	want(t, s.c.SAdd(ctx, "s:b", "y"), 0)
	wantSorted(t, s.a.SMembers(ctx, "s:a"), "x", "y", "z")
	want(t, s.a.SIsMember(ctx, "s:a", "x"), true)
	want(t, s.a.SIsMember(ctx, "s:a", "w"), false)
	want(t, s.a.SMIsMember(ctx, "s:a", "x", "nope", "z"), []bool{true, false, true})
	want(t, s.b.SCard(ctx, "s:a"), 3)
	want(t, s.b.SCard(ctx, "s:none"), 0)
	wantSorted(t, s.a.SInter(ctx, "s:a", "s:b"), "y", "z")
	wantSorted(t, s.b.SUnion(ctx, "s:a", "s:b"), "w", "x", "y", "z")
	wantSorted(t, s.a.SDiff(ctx, "s:a", "s:b"), "x")
	wantSorted(t, s.a.SInter(ctx, "s:a", "s:none"))
	want(t, s.c.SUnionStore(ctx, "s:u", "s:a", "s:b"), 4)
	wantSorted(t, s.a.SMembers(ctx, "s:u"), "w", "x", "y", "z")
	want(t, s.c.SInterStore(ctx, "s:i", "s:a", "s:b"), 2)
	wantSorted(t, s.b.SMembers(ctx, "s:i"), "y", "z")
	want(t, s.c.SInterStore(ctx, "s:i", "s:a", "s:none"), 0)
	want(t, s.a.Exists(ctx, "s:i"), 0) // an empty result deletes the destination
	want(t, s.c.SDiffStore(ctx, "s:d", "s:u", "s:a"), 1)
	wantSorted(t, s.b.SMembers(ctx, "s:d"), "w")
	want(t, s.c.SRem(ctx, "s:a", "x", "nope"), 1)
	want(t, s.c.SMove(ctx, "s:b", "s:a", "w"), true)
	want(t, s.c.SMove(ctx, "s:b", "s:a", "nope"), false)
	wantSorted(t, s.a.SMembers(ctx, "s:a"), "w", "y", "z")
	wantSorted(t, s.b.SMembers(ctx, "s:b"), "y", "z")

	// SPOP: removes random members, and every replica removed the same ones.
	var orig []interface{}
	origSet := map[string]bool{}
	for i := 0; i < 20; i++ {
		m := fmt.Sprintf("m%02d", i)
		orig = append(orig, m)
		origSet[m] = true
	}
	want(t, s.a.SAdd(ctx, "s:pop", orig...), 20)
	popped, err := s.b.SPopN(ctx, "s:pop", 5).Result()
	if err != nil || len(popped) != 5 {
		t.Fatalf("SPOP s:pop 5: got %q, %v; want 5 members", popped, err)
	}
	one, err := s.c.SPop(ctx, "s:pop").Result()
	if err != nil {
		t.Fatalf("SPOP s:pop: %v", err)
	}
	popped = append(popped, one)
	seen := map[string]bool{}
	for _, m := range popped {
		if !origSet[m] || seen[m] {
			t.Errorf("SPOP returned %q: not a member, or returned twice (all popped: %q)", m, popped)
		}
		seen[m] = true
	}
	want(t, s.a.SCard(ctx, "s:pop"), 14)
	var rest []string
	for i, cl := range s.all() {
		got, err := cl.SMembers(ctx, "s:pop").Result()
		sort.Strings(got)
		if err != nil || len(got) != 14 {
			t.Errorf("node %d: SMEMBERS s:pop after SPOP: %q, %v; want 14 members", i+1, got, err)
		}
		if i == 0 {
			rest = got
		} else if !slices.Equal(got, rest) {
			t.Errorf("replicas disagree after SPOP: node 1 has %q, node %d has %q", rest, i+1, got)
		}
		for _, m := range got {
			if seen[m] || !origSet[m] {
				t.Errorf("node %d: %q still in s:pop after SPOP returned it (or never added)", i+1, m)
			}
		}
	}
	want(t, s.a.SPopN(ctx, "s:none", 3), []string{})
	wantNil(t, s.a.SPop(ctx, "s:none"))
	if m, err := s.b.SRandMember(ctx, "s:pop").Result(); err != nil || !origSet[m] || seen[m] {
		t.Errorf("SRANDMEMBER s:pop: %q, %v; want one of the remaining members", m, err)
	}
	want(t, s.a.SCard(ctx, "s:pop"), 14)

	// SSCAN over 300 members.
	var many []interface{}
	exp := map[string]bool{}
	for i := 0; i < 300; i++ {
		m := fmt.Sprintf("member:%d", i)
		many = append(many, m)
		exp[m] = true
	}
	want(t, s.a.SAdd(ctx, "s:big", many...), 300)
	got := map[string]bool{}
	for _, m := range scanAll(t, s.b.SScan(ctx, "s:big", 0, "", 40).Iterator()) {
		got[m] = true
	}
	if !reflect.DeepEqual(got, exp) {
		t.Errorf("SSCAN s:big: %d distinct members, want the 300 members", len(got))
	}
	got = map[string]bool{}
	for _, m := range scanAll(t, s.c.SScan(ctx, "s:big", 0, "member:2*", 40).Iterator()) {
		got[m] = true
	}
	if len(got) != 111 { // 2, 20..29, 200..299
		t.Errorf("SSCAN s:big MATCH member:2*: %d distinct members, want 111", len(got))
	}
}

func smokeSortedSets(t *testing.T, s *smoke) {
	ctx := context.Background()
	requireCommands(t, s.a, "zadd", "zscore", "zrange", "zrangebyscore", "zrevrange", "zrank", "zrevrank", "zcard", "zcount", "zincrby", "zrem", "zmscore", "zpopmin", "zpopmax", "zunionstore", "zinterstore")
	z := func(score float64, m string) redis.Z { return redis.Z{Score: score, Member: m} }
	want(t, s.b.ZAdd(ctx, "z:a", z(1, "a"), z(2, "b"), z(3, "c")), 3)
	want(t, s.b.ZAddArgs(ctx, "z:a", redis.ZAddArgs{NX: true, Members: []redis.Z{z(10, "a"), z(4, "d")}}), 1)
	want(t, s.c.ZScore(ctx, "z:a", "a"), 1)
	want(t, s.b.ZAddArgs(ctx, "z:a", redis.ZAddArgs{XX: true, Members: []redis.Z{z(5, "a"), z(9, "e")}}), 0)
	want(t, s.c.ZScore(ctx, "z:a", "a"), 5)
	wantNil(t, s.c.ZScore(ctx, "z:a", "e"))
	want(t, s.b.ZAddArgs(ctx, "z:a", redis.ZAddArgs{GT: true, Ch: true, Members: []redis.Z{z(4, "a"), z(20, "b")}}), 1)
	want(t, s.b.ZAddArgs(ctx, "z:a", redis.ZAddArgs{LT: true, Ch: true, Members: []redis.Z{z(0.5, "c"), z(100, "d")}}), 1)
	want(t, s.b.ZAddArgsIncr(ctx, "z:a", redis.ZAddArgs{Members: []redis.Z{z(2.5, "a")}}), 7.5)
	// now: c=0.5 d=4 a=7.5 b=20
	want(t, s.a.ZRangeWithScores(ctx, "z:a", 0, -1), []redis.Z{z(0.5, "c"), z(4, "d"), z(7.5, "a"), z(20, "b")})
	want(t, s.a.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: "z:a", Start: "(0.5", Stop: "+inf", ByScore: true, Offset: 1, Count: 2}),
		[]redis.Z{z(7.5, "a"), z(20, "b")})
	want(t, s.a.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: "z:a", Start: "+inf", Stop: "-inf", ByScore: true, Rev: true, Offset: 0, Count: 3}),
		[]redis.Z{z(20, "b"), z(7.5, "a"), z(4, "d")})
	want(t, s.c.ZRangeArgs(ctx, redis.ZRangeArgs{Key: "z:a", Start: 0, Stop: 1, Rev: true}), []string{"b", "a"})
	want(t, s.c.ZRangeByScore(ctx, "z:a", &redis.ZRangeBy{Min: "1", Max: "(20"}), []string{"d", "a"})
	want(t, s.c.ZRevRangeWithScores(ctx, "z:a", 0, 0), []redis.Z{z(20, "b")})
	want(t, s.a.ZRank(ctx, "z:a", "a"), 2)
	want(t, s.a.ZRevRank(ctx, "z:a", "a"), 1)
	wantNil(t, s.a.ZRank(ctx, "z:a", "nope"))
	want(t, s.a.ZCard(ctx, "z:a"), 4)
	want(t, s.a.ZCount(ctx, "z:a", "4", "20"), 3)
	want(t, s.a.ZIncrBy(ctx, "z:a", -7, "b"), 13)
	want(t, s.c.ZScore(ctx, "z:a", "b"), 13)
	want(t, s.a.ZRem(ctx, "z:a", "d", "nope"), 1)
	want(t, s.b.ZMScore(ctx, "z:a", "a", "nope"), []float64{7.5, 0})
	wantErr(t, s.b.Do(ctx, "zadd", "z:a", "nx", "gt", 1, "x"),
		"ERR GT, LT, and/or NX options at the same time are not compatible")
	want(t, s.a.Set(ctx, "z:str", "v", 0), "OK")
	wantErr(t, s.a.ZIncrBy(ctx, "z:str", 1, "x"), "WRONGTYPE")
	// ZPOPMIN takes the lowest scores, on every replica.
	want(t, s.a.ZAdd(ctx, "z:p", z(3, "c"), z(1, "a"), z(2, "b"), z(2, "bb")), 4)
	want(t, s.b.ZPopMin(ctx, "z:p", 2), []redis.Z{z(1, "a"), z(2, "b")})
	want(t, s.c.ZPopMax(ctx, "z:p"), []redis.Z{z(3, "c")})
	want(t, s.a.ZRangeWithScores(ctx, "z:p", 0, -1), []redis.Z{z(2, "bb")})
	want(t, s.b.ZPopMin(ctx, "z:p", 5), []redis.Z{z(2, "bb")})
	want(t, s.c.Exists(ctx, "z:p"), 0)
	want(t, s.b.ZPopMin(ctx, "z:p"), []redis.Z{})
	// ZUNIONSTORE with weights and aggregates.
	want(t, s.a.ZAdd(ctx, "z:u1", z(1, "x"), z(2, "y")), 2)
	want(t, s.a.ZAdd(ctx, "z:u2", z(10, "y"), z(20, "w")), 2)
	want(t, s.b.ZUnionStore(ctx, "z:u", &redis.ZStore{Keys: []string{"z:u1", "z:u2"}, Weights: []float64{2, 1}}), 3)
	want(t, s.c.ZRangeWithScores(ctx, "z:u", 0, -1), []redis.Z{z(2, "x"), z(14, "y"), z(20, "w")})
	want(t, s.b.ZUnionStore(ctx, "z:u", &redis.ZStore{Keys: []string{"z:u1", "z:u2"}, Aggregate: "MAX"}), 3)
	want(t, s.c.ZRangeWithScores(ctx, "z:u", 0, -1), []redis.Z{z(1, "x"), z(10, "y"), z(20, "w")})
	want(t, s.b.ZInterStore(ctx, "z:i", &redis.ZStore{Keys: []string{"z:u1", "z:u2"}, Aggregate: "MIN"}), 1)
	want(t, s.c.ZRangeWithScores(ctx, "z:i", 0, -1), []redis.Z{z(2, "y")})
}

// smokeLeaderboard: players scored concurrently from all three nodes; the
// board is exact and ordered as Redis orders it (score, then member).
func smokeLeaderboard(t *testing.T, s *smoke) {
	ctx := context.Background()
	requireCommands(t, s.a, "zincrby", "zcard", "zrevrange", "zrevrank", "zscore", "zrange")
	const players, rounds = 12, 4
	exp := map[string]float64{}
	var wg sync.WaitGroup
	errs := make(chan error, 3*players*rounds)
	for n, cl := range s.all() {
		type inc struct {
			p   string
			pts float64
		}
		var incs []inc
		for r := 0; r < rounds; r++ {
			for p := 0; p < players; p++ {
				pts := float64((p*7+n*3+r)%11 + 1)
				name := fmt.Sprintf("player%02d", p)
				incs = append(incs, inc{name, pts})
				exp[name] += pts
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, in := range incs {
				if err := cl.ZIncrBy(ctx, "lb", in.pts, in.p).Err(); err != nil {
					errs <- fmt.Errorf("ZINCRBY lb %v %s: %w", in.pts, in.p, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var board []redis.Z
	for p, sc := range exp {
		board = append(board, redis.Z{Score: sc, Member: p})
	}
	sort.Slice(board, func(i, j int) bool { // ZREVRANGE order: score desc, then member desc
		if board[i].Score != board[j].Score {
			return board[i].Score > board[j].Score
		}
		return board[i].Member.(string) > board[j].Member.(string)
	})
	want(t, s.a.ZCard(ctx, "lb"), players)
	want(t, s.b.ZRevRangeWithScores(ctx, "lb", 0, 2), board[:3])
	for i, cl := range s.all() {
		if !want(t, cl.ZRevRangeWithScores(ctx, "lb", 0, -1), board) {
			t.Errorf("node %d has a different leaderboard", i+1)
		}
	}
	me := board[5].Member.(string)
	want(t, s.c.ZRevRank(ctx, "lb", me), 5)
	want(t, s.c.ZScore(ctx, "lb", me), board[5].Score)
	want(t, s.a.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: "lb", Start: "+inf", Stop: "-inf", ByScore: true, Rev: true, Offset: 3, Count: 2}),
		board[3:5])
}

func smokePipeline(t *testing.T, s *smoke) {
	ctx := context.Background()
	requireCommands(t, s.a, "set", "incr", "rpush", "hset", "get", "lrange", "llen", "hlen")
	cmds, err := s.a.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < 20; i++ {
			p.Set(ctx, fmt.Sprintf("p:k%d", i), fmt.Sprintf("v%d", i), 0)
			p.Incr(ctx, "p:ctr")
			p.RPush(ctx, "p:list", i)
			p.HSet(ctx, "p:hash", fmt.Sprintf("f%d", i), i)
			if i == 10 {
				p.Incr(ctx, "p:k0") // fails (not an integer); the others still run
			} else {
				p.Get(ctx, fmt.Sprintf("p:k%d", i)) // a read sees the writes before it
			}
		}
		return nil
	})
	if err == nil || !strings.HasPrefix(err.Error(), "ERR value is not an integer") {
		t.Errorf("Pipelined: error %v, want the INCR p:k0 error", err)
	}
	if len(cmds) != 100 {
		t.Errorf("Pipelined: %d replies, want 100", len(cmds))
	} else if e := cmds[54].Err(); e == nil || cmdline(cmds[54].Args()) != "incr p:k0" {
		t.Errorf("Pipelined: reply 54 is %s: %v, want the INCR p:k0 error", cmdline(cmds[54].Args()), e)
	}
	// Re-run as a plain pipeline to look at every reply.
	pipe := s.b.Pipeline()
	var sets []*redis.StatusCmd
	var incrs, pushes, hsets []*redis.IntCmd
	var gets []*redis.StringCmd
	var bad *redis.IntCmd
	for i := 0; i < 20; i++ {
		sets = append(sets, pipe.Set(ctx, fmt.Sprintf("p2:k%d", i), fmt.Sprintf("v%d", i), 0))
		incrs = append(incrs, pipe.Incr(ctx, "p2:ctr"))
		pushes = append(pushes, pipe.RPush(ctx, "p2:list", i))
		hsets = append(hsets, pipe.HSet(ctx, "p2:hash", fmt.Sprintf("f%d", i), i))
		if i == 10 {
			bad = pipe.Incr(ctx, "p2:k0")
		} else {
			gets = append(gets, pipe.Get(ctx, fmt.Sprintf("p2:k%d", i)))
		}
	}
	if n := pipe.Len(); n != 100 {
		t.Fatalf("pipeline holds %d commands, want 100", n)
	}
	_, _ = pipe.Exec(ctx)
	for i := 0; i < 20; i++ {
		want(t, sets[i], "OK")
		want(t, incrs[i], int64(i+1))
		want(t, pushes[i], int64(i+1))
		want(t, hsets[i], 1)
	}
	for _, g := range gets {
		want(t, g, "v"+strings.TrimPrefix(g.Args()[1].(string), "p2:k"))
	}
	wantErr(t, bad, "ERR value is not an integer")
	for _, pre := range []string{"p:", "p2:"} {
		want(t, s.c.Get(ctx, pre+"ctr"), "20")
		want(t, s.c.LLen(ctx, pre+"list"), 20)
		want(t, s.c.LRange(ctx, pre+"list", 0, 2), []string{"0", "1", "2"})
		want(t, s.c.HLen(ctx, pre+"hash"), 20)
		want(t, s.c.Get(ctx, pre+"k19"), "v19")
	}
}

func smokeTransactions(t *testing.T, s *smoke) {
	ctx := context.Background()
	requireCommands(t, s.a, "multi", "exec", "incr", "incrby", "set", "get", "lpush")
	var incr, incrby *redis.IntCmd
	var set *redis.StatusCmd
	var get *redis.StringCmd
	var push *redis.IntCmd
	cmds, err := s.a.TxPipelined(ctx, func(p redis.Pipeliner) error {
		incr = p.Incr(ctx, "tx:a")
		incrby = p.IncrBy(ctx, "tx:a", 10)
		set = p.Set(ctx, "tx:b", "x", 0)
		get = p.Get(ctx, "tx:b")
		push = p.LPush(ctx, "tx:l", "1", "2")
		return nil
	})
	if err != nil || len(cmds) != 5 {
		t.Errorf("TxPipelined: %d cmds, %v", len(cmds), err)
	}
	want(t, incr, 1)
	want(t, incrby, 11)
	want(t, set, "OK")
	want(t, get, "x")
	want(t, push, 2)
	want(t, s.b.Get(ctx, "tx:a"), "11")

	// A command that fails at EXEC does not stop the others (no rollback).
	var ok1, ok2 *redis.IntCmd
	var bad *redis.IntCmd
	_, err = s.b.TxPipelined(ctx, func(p redis.Pipeliner) error {
		ok1 = p.Incr(ctx, "tx:a")
		bad = p.Incr(ctx, "tx:b")
		ok2 = p.Incr(ctx, "tx:a")
		return nil
	})
	if err == nil {
		t.Error("TxPipelined with INCR on a non-integer: no error")
	}
	want(t, ok1, 12)
	wantErr(t, bad, "ERR value is not an integer")
	want(t, ok2, 13)
	// An error at queue time discards the whole transaction.
	_, err = s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "tx:aborted", "1", 0)
		p.Do(ctx, "nosuchcommand", "x")
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "EXECABORT") && !strings.Contains(err.Error(), "unknown command") {
		t.Errorf("TxPipelined with an unknown command: error %v, want EXECABORT / unknown command", err)
	}
	want(t, s.a.Exists(ctx, "tx:aborted"), 0)
}

func smokeWatch(t *testing.T, s *smoke) {
	ctx := context.Background()
	requireCommands(t, s.a, "watch", "multi", "exec", "get", "set")
	// A watched key changed by another client on another node: EXEC fails.
	want(t, s.a.Set(ctx, "w:k", "0", 0), "OK")
	err := s.a.Watch(ctx, func(tx *redis.Tx) error {
		v, err := tx.Get(ctx, "w:k").Result()
		if err != nil {
			return err
		}
		if err := s.b.Set(ctx, "w:k", "other", 0).Err(); err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "w:k", v+"-mine", 0)
			return nil
		})
		return err
	}, "w:k")
	if !errors.Is(err, redis.TxFailedErr) {
		t.Errorf("WATCH w:k, SET on another node, EXEC: error %v, want redis.TxFailedErr", err)
	}
	want(t, s.c.Get(ctx, "w:k"), "other")

	// Optimistic-lock increments from 6 clients on 3 nodes: the total is exact.
	const perNode, incs = 2, 10
	var wg sync.WaitGroup
	var conflicts atomic.Int64
	errs := make(chan error, 3*perNode)
	deadline := time.Now().Add(30 * time.Second)
	want(t, s.a.Set(ctx, "w:ctr", "0", 0), "OK")
	for n, cl := range s.all() {
		for w := 0; w < perNode; w++ {
			wg.Add(1)
			go func(n, w int) {
				defer wg.Done()
				for i := 0; i < incs; i++ {
					done := false
					for attempt := 0; attempt < 200 && !done && time.Now().Before(deadline); attempt++ {
						err := cl.Watch(ctx, func(tx *redis.Tx) error {
							v, err := tx.Get(ctx, "w:ctr").Int()
							if err != nil {
								return err
							}
							_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
								p.Set(ctx, "w:ctr", v+1, 0)
								return nil
							})
							return err
						}, "w:ctr")
						switch {
						case err == nil:
							done = true
						case errors.Is(err, redis.TxFailedErr):
							conflicts.Add(1)
						default:
							errs <- fmt.Errorf("node %d worker %d: %w", n+1, w, err)
							return
						}
					}
					if !done {
						errs <- fmt.Errorf("node %d worker %d: increment %d not done after 200 attempts or 30s", n+1, w, i)
						return
					}
				}
			}(n, w)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	want(t, s.b.Get(ctx, "w:ctr"), strconv.Itoa(3*perNode*incs))
	t.Logf("WATCH increments: %d conflicts (EXEC aborted and retried)", conflicts.Load())
}

func smokeScripts(t *testing.T, s *smoke) {
	ctx := context.Background()
	requireCommands(t, s.a, "eval", "evalsha", "script")
	want(t, s.a.Eval(ctx, "return {KEYS[1], ARGV[1], 42}", []string{"sc:k"}, "arg"), interface{}([]interface{}{"sc:k", "arg", int64(42)}))
	want(t, s.a.Eval(ctx, "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('GET', KEYS[1])", []string{"sc:k"}, "v1"), interface{}("v1"))
	want(t, s.b.Get(ctx, "sc:k"), "v1") // a script's writes are replicated
	want(t, s.c.Eval(ctx, "return redis.call('INCRBY', KEYS[1], ARGV[1])", []string{"sc:n"}, 5), interface{}(int64(5)))
	want(t, s.c.Eval(ctx, "return 3.99", nil), interface{}(int64(3)))
	want(t, s.c.Eval(ctx, "return redis.status_reply('FINE')", nil), interface{}("FINE"))
	wantNil(t, s.c.Eval(ctx, "return nil", nil))
	wantNil(t, s.c.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{"sc:none"}))
	wantErr(t, s.c.Eval(ctx, "return redis.error_reply('MYERR boom')", nil), "MYERR boom")
	wantErr(t, s.c.Eval(ctx, "return redis.call('INCR', KEYS[1])", []string{"sc:k"}), "ERR value is not an integer")
	want(t, s.c.Eval(ctx, "local r = redis.pcall('INCR', KEYS[1]); return type(r) == 'table' and r.err ~= nil", []string{"sc:k"}),
		interface{}(int64(1)))

	src := "return redis.call('GET', KEYS[1]) .. ARGV[1]"
	sum := sha1.Sum([]byte(src))
	sha := hex.EncodeToString(sum[:])
	want(t, s.a.ScriptLoad(ctx, src), sha)
	want(t, s.a.EvalSha(ctx, sha, []string{"sc:k"}, "!"), interface{}("v1!"))
	want(t, s.a.ScriptExists(ctx, sha, strings.Repeat("0", 40)), []bool{true, false})
	wantErr(t, s.a.EvalSha(ctx, strings.Repeat("0", 40), nil), "NOSCRIPT")

	// redis.NewScript: EVALSHA, then EVAL when the script is not cached.
	// A body no other run or suite has loaded (see redis_py_smoke.py).
	fresh := redis.NewScript(fmt.Sprintf("return {KEYS[1], ARGV[1], %d}", time.Now().UnixNano()%1e15+7))
	want(t, s.b.ScriptExists(ctx, fresh.Hash()), []bool{false})
	r1, err := fresh.Run(ctx, s.b, []string{"sc:x"}, "y").Result()
	if v, ok := r1.([]interface{}); err != nil || !ok || len(v) != 3 || v[0] != "sc:x" || v[1] != "y" {
		t.Errorf("Script.Run (EVALSHA, then EVAL): %#v, %v", r1, err)
	}
	want(t, s.b.ScriptExists(ctx, fresh.Hash()), []bool{true}) // EVAL cached it
	r2, err := fresh.Run(ctx, s.b, []string{"sc:x"}, "y").Result()
	if err != nil || !reflect.DeepEqual(r1, r2) {
		t.Errorf("Script.Run again (EVALSHA): %#v, %v; want %#v", r2, err, r1)
	}

	// Compare-and-delete: releasing a lock only with the right token.
	release := redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)
	want(t, s.a.SetNX(ctx, "sc:lock", "token-a", 10*time.Second), true)
	want(t, s.a.SetNX(ctx, "sc:lock", "token-b", 10*time.Second), false)
	want(t, release.Run(ctx, s.b, []string{"sc:lock"}, "token-b"), interface{}(int64(0)))
	want(t, s.c.Get(ctx, "sc:lock"), "token-a")
	want(t, release.Run(ctx, s.c, []string{"sc:lock"}, "token-a"), interface{}(int64(1)))
	want(t, s.a.Exists(ctx, "sc:lock"), 0)
	want(t, release.Run(ctx, s.a, []string{"sc:lock"}, "token-a"), interface{}(int64(0)))

	// Scripts are atomic: a capped counter run concurrently from 3 nodes.
	capped := redis.NewScript(`local v = tonumber(redis.call("get", KEYS[1]) or "0")
if v >= tonumber(ARGV[1]) then return 0 end
redis.call("set", KEYS[1], v + 1)
return 1`)
	var granted atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, cl := range s.all() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				n, err := capped.Run(ctx, cl, []string{"sc:capped"}, 50).Int64()
				if err != nil {
					errs <- err
					return
				}
				granted.Add(n)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("capped counter script: %v", err)
	}
	if g := granted.Load(); g != 50 {
		t.Errorf("capped counter script: %d runs granted, want exactly 50 of 75", g)
	}
	want(t, s.a.Get(ctx, "sc:capped"), "50")
}

func smokePubSub(t *testing.T, s *smoke) {
	ctx := context.Background()
	requireCommands(t, s.a, "subscribe", "psubscribe", "unsubscribe", "publish", "pubsub")
	sub := s.a.Subscribe(ctx, "ps:news")
	defer sub.Close()
	msg, err := sub.Receive(ctx)
	if sb, ok := msg.(*redis.Subscription); err != nil || !ok || *sb != (redis.Subscription{Kind: "subscribe", Channel: "ps:news", Count: 1}) {
		t.Fatalf("SUBSCRIBE ps:news: got %#v, %v", msg, err)
	}
	ch := sub.Channel()
	const n = 50
	for i := 0; i < n; i++ { // published on node 2, delivered on node 1
		if err := s.b.Publish(ctx, "ps:news", fmt.Sprintf("m%02d", i)).Err(); err != nil {
			t.Fatalf("PUBLISH: %v", err)
		}
	}
	want(t, s.a.Publish(ctx, "ps:news", "local"), 1) // the subscriber is on this node
	timeout := time.After(10 * time.Second)
	for i := 0; i <= n; i++ {
		exp := fmt.Sprintf("m%02d", i)
		if i == n {
			exp = "local"
		}
		select {
		case m := <-ch:
			if m.Channel != "ps:news" || m.Payload != exp || m.Pattern != "" {
				t.Fatalf("message %d: got %#v, want %q on ps:news", i, m, exp)
			}
		case <-timeout:
			t.Fatalf("only %d of %d published messages received within 10s", i, n+1)
		}
	}
	want(t, s.a.PubSubChannels(ctx, "ps:*"), []string{"ps:news"})

	psub := s.c.PSubscribe(ctx, "ps:ev.*")
	defer psub.Close()
	msg, err = psub.Receive(ctx)
	if sb, ok := msg.(*redis.Subscription); err != nil || !ok || *sb != (redis.Subscription{Kind: "psubscribe", Channel: "ps:ev.*", Count: 1}) {
		t.Fatalf("PSUBSCRIBE ps:ev.*: got %#v, %v", msg, err)
	}
	for _, p := range [][2]string{{"ps:ev.one", "1"}, {"ps:other", "x"}, {"ps:ev.two", "2"}} {
		if err := s.a.Publish(ctx, p[0], p[1]).Err(); err != nil {
			t.Fatalf("PUBLISH %s: %v", p[0], err)
		}
	}
	pch := psub.Channel()
	for _, exp := range []redis.Message{{Channel: "ps:ev.one", Pattern: "ps:ev.*", Payload: "1"}, {Channel: "ps:ev.two", Pattern: "ps:ev.*", Payload: "2"}} {
		select {
		case m := <-pch:
			if m.Channel != exp.Channel || m.Pattern != exp.Pattern || m.Payload != exp.Payload {
				t.Errorf("pattern message: got %#v, want %#v", m, exp)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("pattern message %q not received within 5s", exp.Payload)
		}
	}
	if err := sub.Unsubscribe(ctx, "ps:news"); err != nil {
		t.Errorf("UNSUBSCRIBE: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.a.Publish(ctx, "ps:news", "gone").Val() != 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	want(t, s.a.Publish(ctx, "ps:news", "gone"), 0)
}

// ---- failover ----

// retryUntil runs op until it succeeds, at most max times and for at most
// d, and returns the attempts, the time taken, the last error and the
// distinct errors seen on the way.
func retryUntil(d time.Duration, max int, op func() error) (attempts int, took time.Duration, err error, seen []string) {
	start := time.Now()
	for attempts = 1; ; attempts++ {
		err = op()
		if err != nil && !slices.Contains(seen, err.Error()) {
			seen = append(seen, err.Error())
		}
		if err == nil || attempts >= max || time.Since(start) > d {
			return attempts, time.Since(start), err, seen
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// smokeReconnect: a client behind a "load balancer" (its Dialer cycles
// through the three nodes) keeps working after kill -9 of the node it is
// connected to, the leader; a single-address client of that node
// reconnects once the node is restarted.
func smokeReconnect(t *testing.T, c *cluster) {
	ctx := context.Background()
	defer func() {
		if t.Failed() {
			c.dumpLogs()
		}
	}()
	lead := c.waitLeader()
	addrs := []string{c.procs[0].client, c.procs[1].client, c.procs[2].client}
	var next atomic.Int64
	next.Store(int64(lead.id - 1)) // the first connection goes to the leader
	var mu sync.Mutex
	var dialed []string
	lb := redis.NewClient(&redis.Options{
		Addr: "kvorum-lb:6379", PoolSize: 1, MaxRetries: -1, ReadTimeout: 12 * time.Second,
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var err error
			for range addrs {
				addr := addrs[int(next.Add(1)-1)%len(addrs)]
				d := net.Dialer{Timeout: time.Second}
				conn, e := d.DialContext(ctx, network, addr)
				if e == nil {
					mu.Lock()
					dialed = append(dialed, addr)
					mu.Unlock()
					return conn, nil
				}
				err = e
			}
			return nil, err
		},
	})
	defer lb.Close()
	single := redis.NewClient(&redis.Options{Addr: lead.client, MaxRetries: -1, DialTimeout: time.Second,
		ReadTimeout: 12 * time.Second})
	defer single.Close()

	want(t, lb.Set(ctx, "rc:before", "1", 0), "OK")
	want(t, single.Get(ctx, "rc:before"), "1")
	mu.Lock()
	connectedTo := dialed[len(dialed)-1]
	mu.Unlock()
	if connectedTo != lead.client {
		t.Fatalf("load-balanced client connected to %s, want the leader %s", connectedTo, lead.client)
	}

	c.kill(lead, syscall.SIGKILL)
	t.Logf("kill -9 node %d (leader, the one both clients are connected to)", lead.id)
	killed := time.Now()
	attempts, took, err, seen := retryUntil(10*time.Second, 100, func() error {
		return lb.Set(ctx, "rc:after", "2", 0).Err()
	})
	if err != nil {
		t.Fatalf("load-balanced client: SET after kill -9 still failing after %d attempts in %v: %q", attempts, took, seen)
	}
	t.Logf("load-balanced client: SET succeeded %v after kill -9, attempt %d; errors before: %q",
		time.Since(killed).Round(time.Millisecond), attempts, seen)
	// Connection errors are expected (the client's node died); an error
	// reply from a surviving node is not: a write the dead leader never got
	// is retried by kvorum until a new leader is elected.
	for _, e := range seen {
		for _, code := range []string{"ERR", "TRYAGAIN", "UNCERTAIN", "CLUSTERDOWN"} {
			if strings.HasPrefix(e, code+" ") {
				t.Errorf("a surviving node answered an error during failover: %q", e)
			}
		}
	}
	want(t, lb.Get(ctx, "rc:after"), "2")
	want(t, lb.Incr(ctx, "rc:n"), 1)
	mu.Lock()
	t.Logf("load-balanced client dialed %q", dialed)
	mu.Unlock()

	// The node is down: its single-address client fails.
	sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	if err := single.Get(sctx, "rc:before").Err(); err == nil {
		t.Errorf("GET through the killed node succeeded")
	}
	cancel()

	c.start(lead)
	restarted := time.Now()
	var got string
	attempts, took, err, seen = retryUntil(15*time.Second, 150, func() error {
		var err error
		got, err = single.Get(ctx, "rc:after").Result()
		return err
	})
	if err != nil {
		t.Fatalf("single-address client: GET after restart still failing after %d attempts in %v: %q", attempts, took, seen)
	}
	if got != "2" {
		t.Errorf("GET rc:after through the restarted node: %q, want \"2\"", got)
	}
	t.Logf("single-address client: GET succeeded %v after restart, attempt %d; errors before: %q",
		time.Since(restarted).Round(time.Millisecond), attempts, seen)
	want(t, single.Get(ctx, "rc:before"), "1")
	want(t, single.Incr(ctx, "rc:n"), 2)
	want(t, lb.Get(ctx, "rc:n"), "2")
}

// ---- redis-py ----

// requireRedisPy fails the test (CI must have it) if Debian's python3
// cannot import redis.
func requireRedisPy(t *testing.T) {
	t.Helper()
	out, err := exec.Command(pythonWithRedis, "-c", "import redis; print(redis.__version__)").CombinedOutput()
	if err != nil {
		t.Fatalf("%s cannot import redis (%v: %s): apt-get install python3-redis", pythonWithRedis, err, strings.TrimSpace(string(out)))
	}
	t.Logf("redis-py %s", strings.TrimSpace(string(out)))
}

// TestRedisPySmoke runs testdata/redis_py_smoke.py (redis-py, Debian's
// python3-redis) against a fresh 3-node cluster, including kill -9 and
// restart of the node the script's client talks to.
func TestRedisPySmoke(t *testing.T) {
	requireRedisPy(t)
	c := newCluster(t, 3)
	c.waitLeader()
	addrs := []string{c.procs[0].client, c.procs[1].client, c.procs[2].client}
	runRedisPy(t, addrs, c)
	if t.Failed() {
		c.dumpLogs()
	}
}

// runRedisPy runs the script. With a cluster it answers the script's
// requests on stdout with lines on stdin:
//
//	READY-FOR-KILL <addr>     -> kill -9 that node, answer KILLED
//	READY-FOR-RESTART <addr>  -> restart it, wait until ready, answer RESTARTED
//
// Without a cluster (reference run) the script is told --no-kill.
func runRedisPy(t *testing.T, addrs []string, c *cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := []string{"-u", "testdata/redis_py_smoke.py"}
	if c == nil {
		args = append(args, "--no-kill")
	}
	cmd := exec.CommandContext(ctx, pythonWithRedis, append(args, addrs...)...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	var protoErr error
	killedSeen, restartedSeen := false, false
	procFor := func(addr string) *proc {
		for _, p := range c.procs {
			if p.client == addr {
				return p
			}
		}
		return nil
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		f := strings.Fields(line)
		if len(f) != 2 || (f[0] != "READY-FOR-KILL" && f[0] != "READY-FOR-RESTART") || protoErr != nil {
			continue
		}
		var p *proc
		if c != nil {
			p = procFor(f[1])
		}
		if p == nil {
			protoErr = fmt.Errorf("script asked %q: not a node of this cluster", line)
			_, _ = io.WriteString(stdin, "ERROR\n")
			continue
		}
		switch f[0] {
		case "READY-FOR-KILL":
			c.kill(p, syscall.SIGKILL)
			killedSeen = true
			t.Logf("kill -9 node %d for the script", p.id)
			_, _ = io.WriteString(stdin, "KILLED\n")
		case "READY-FOR-RESTART":
			c.start(p)
			c.waitLeader()
			restartedSeen = true
			t.Logf("restarted node %d for the script", p.id)
			_, _ = io.WriteString(stdin, "RESTARTED\n")
		}
	}
	stdin.Close()
	err = cmd.Wait()
	output := out.String() + stderr.String()
	if ctx.Err() != nil {
		t.Fatalf("redis-py smoke did not finish within 90s; output:\n%s", output)
	}
	if err != nil {
		t.Fatalf("redis-py smoke failed (%v); output:\n%s", err, output)
	}
	if protoErr != nil {
		t.Fatalf("%v; output:\n%s", protoErr, output)
	}
	if c != nil && (!killedSeen || !restartedSeen) {
		t.Fatalf("the script never asked for the kill/restart; output:\n%s", output)
	}
	var passed int
	for _, l := range strings.Split(out.String(), "\n") {
		if _, err := fmt.Sscanf(l, "redis-py smoke: %d checks passed", &passed); err == nil {
			break
		}
	}
	if passed < 100 {
		t.Fatalf("no summary line with at least 100 checks; output:\n%s", output)
	}
	t.Logf("redis-py smoke output:\n%s", output)
}
