package server

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/redis/go-redis/v9"
)

// BenchmarkACLOverhead is issue 16's cost goal: GET and SET with ACLs on
// (a user with a key pattern and a category rule: checked on the node that
// receives the command, SETs wrapped and checked again at apply, GETs
// checked again after the read point) against ACLs off (the default user,
// allowed everything), on one 3-node cluster on the real disk, through a
// follower, 16 clients in parallel; the two variants alternate within
// the run, so run it with -count to compare like with like:
//
//	go test ./internal/server -run '^$' -bench ACLOverhead -benchtime 4000x -count 4
func BenchmarkACLOverhead(b *testing.B) {
	dir := b.TempDir()
	c := newClusterWith(b, 3, func(id uint64, cfg *Config) {
		cfg.FS = vfs.Default
		cfg.DataDir = filepath.Join(dir, fmt.Sprintf("node-%d", id))
		cfg.SnapshotThreshold = 10_000
	})
	lead := c.waitLeader()
	follower := lead%3 + 1
	ctx := testCtx(b, 10*time.Minute)
	if err := c.client(lead).Do(ctx, "ACL", "SETUSER", "app", "on", ">pw", "~key:*", "~other:*", "+@all", "-@dangerous").Err(); err != nil {
		b.Fatal(err)
	}
	clients := map[string]*redis.Client{
		"off": redis.NewClient(&redis.Options{Addr: c.node(follower).ClientAddr(), PoolSize: 16}),
		"on":  redis.NewClient(&redis.Options{Addr: c.node(follower).ClientAddr(), PoolSize: 16, Username: "app", Password: "pw"}),
	}
	for _, cl := range clients {
		b.Cleanup(func() { cl.Close() })
	}
	for _, op := range []string{"set", "get"} {
		for _, acl := range []string{"off", "on"} {
			b.Run(op+"/acl="+acl, func(b *testing.B) {
				cl := clients[acl]
				b.SetParallelism(8) // 16 clients on 2 cores
				b.RunParallel(func(pb *testing.PB) {
					i := 0
					for pb.Next() {
						key := fmt.Sprintf("key:%d", i%1000)
						i++
						var err error
						if op == "set" {
							err = cl.Set(ctx, key, "value-of-64-bytes-0123456789012345678901234567890123456789012", 0).Err()
						} else {
							err = cl.Get(ctx, key).Err()
							if err == redis.Nil {
								err = nil
							}
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
