package server

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvorum/kvorum/internal/kvdiff"
)

// TestFunctionDumpRestoreWithRedis moves FUNCTION DUMP payloads both ways
// between redis-server and a 3-node cluster: a payload redis-server dumped
// (LZF-compressed library codes) restores into kvorum through a follower,
// and every node then runs its functions (RESTORE is replicated through
// Raft); kvorum's payload restores into redis-server, which then lists the
// same libraries and runs the same functions.
func TestFunctionDumpRestoreWithRedis(t *testing.T) {
	if !kvdiff.HaveRedis() {
		t.Skip("redis-server not installed")
	}
	ctx := context.Background()
	ref := redis.NewClient(&redis.Options{Addr: kvdiff.StartServer(t), Protocol: 2})
	defer ref.Close()
	c := newTestCluster(t, 3)
	lead := c.waitLeader()
	follower := c.client(followersOf(lead, 3)[0])

	libs := []string{
		"#!lua name=first\n" +
			"-- long enough for Redis to compress it: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n" +
			"redis.register_function('hello', function(keys, args) return 'hello ' .. args[1] end)",
		"#!lua name=third\n" +
			"redis.register_function{function_name='ro', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}, description='reads'}",
		"#!lua name=second\nredis.register_function('two', function() return 2 end)",
	}
	must := func(r interface{ Err() error }) {
		t.Helper()
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range libs {
		must(ref.FunctionLoad(ctx, l))
	}
	fromRedis, err := ref.FunctionDump(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}

	// Redis -> kvorum.
	if r, err := follower.FunctionRestore(ctx, fromRedis).Result(); err != nil || r != "OK" {
		t.Fatalf("FUNCTION RESTORE of redis-server's payload in kvorum: %q %v", r, err)
	}
	if err := follower.FunctionRestore(ctx, fromRedis).Err(); err == nil || !strings.HasPrefix(err.Error(), "ERR Library ") {
		t.Fatalf("second RESTORE (APPEND): %v", err)
	}
	for id := uint64(1); id <= 3; id++ {
		cl := c.client(id)
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, err := cl.FCall(ctx, "hello", nil, "world").Result()
			if err == nil && got == "hello world" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d: FCALL hello after RESTORE: %v %v", id, got, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	wantList, err := ref.Do(ctx, "FUNCTION", "LIST", "LIBRARYNAME", "first", "WITHCODE").Result()
	if err != nil {
		t.Fatal(err)
	}
	gotList, err := follower.Do(ctx, "FUNCTION", "LIST", "LIBRARYNAME", "first", "WITHCODE").Result()
	if err != nil || !reflect.DeepEqual(gotList, wantList) {
		t.Fatalf("FUNCTION LIST after RESTORE:\nkvorum:\n%v\nredis-server:\n%v", gotList, wantList)
	}

	// kvorum -> Redis.
	fromKvorum, err := follower.FunctionDump(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := ref.FunctionRestore(ctx, fromKvorum).Err(); err == nil || !strings.HasPrefix(err.Error(), "ERR Library ") {
		t.Fatalf("redis-server's RESTORE (APPEND) of kvorum's payload: %v", err)
	}
	must(ref.FunctionFlush(ctx))
	if r, err := ref.Do(ctx, "FUNCTION", "RESTORE", fromKvorum, "FLUSH").Result(); err != nil || r != "OK" {
		t.Fatalf("redis-server's RESTORE of kvorum's payload: %v %v", r, err)
	}
	if got, err := ref.FCall(ctx, "two", nil).Result(); err != nil || got != int64(2) {
		t.Fatalf("redis-server: FCALL two after RESTORE: %v %v", got, err)
	}
	for _, lib := range []string{"first", "second", "third"} {
		want, _ := ref.Do(ctx, "FUNCTION", "LIST", "LIBRARYNAME", lib, "WITHCODE").Result()
		got, _ := follower.Do(ctx, "FUNCTION", "LIST", "LIBRARYNAME", lib, "WITHCODE").Result()
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("library %s after the round trip:\nkvorum:\n%v\nredis-server:\n%v", lib, got, want)
		}
	}

	// A payload from redis-server with REPLACE and FLUSH, through kvorum.
	must(ref.FunctionFlush(ctx))
	must(ref.FunctionLoad(ctx, "#!lua name=second\nredis.register_function('three', function() return 3 end)"))
	replacing, err := ref.FunctionDump(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := follower.Do(ctx, "FUNCTION", "RESTORE", replacing, "REPLACE").Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := follower.FCall(ctx, "three", nil).Result(); err != nil || got != int64(3) {
		t.Fatalf("FCALL three after RESTORE REPLACE: %v %v", got, err)
	}
	if err := follower.FCall(ctx, "two", nil).Err(); err == nil || err.Error() != "ERR Function not found" {
		t.Fatalf("FCALL two after RESTORE REPLACE: %v", err)
	}
	if err := follower.Do(ctx, "FUNCTION", "RESTORE", replacing, "FLUSH").Err(); err != nil {
		t.Fatal(err)
	}
	if err := follower.FCall(ctx, "hello", nil, "x").Err(); err == nil || err.Error() != "ERR Function not found" {
		t.Fatalf("FCALL hello after RESTORE FLUSH: %v", err)
	}
	// A corrupted payload.
	bad := []byte(fromRedis)
	bad[3] ^= 1
	if err := follower.FunctionRestore(ctx, string(bad)).Err(); err == nil || err.Error() != "ERR DUMP payload version or checksum are wrong" {
		t.Fatalf("corrupted payload: %v", err)
	}
}
