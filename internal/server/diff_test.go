package server

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvorum/kvorum/internal/kv/kvdiff"
)

// The end-to-end differential test: the command sequences of
// internal/kv/testdata/diff/*.txt and of testdata/diff/*.txt (connection-
// level sequences: MULTI/EXEC/WATCH, which the state machine alone cannot
// run) are sent with go-redis to a 3-node kvorum cluster (through a
// follower, so forwarding is exercised too) and to a real redis-server, each
// over one connection, and the replies must be identical.
func TestDifferentialAgainstRedisThroughCluster(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) { differentialThroughCluster(t, proto) })
	}
}

// differentialThroughCluster runs the sequences with both clients speaking
// protocol version proto (RESP3: doubles, maps, sets and pairs of scores
// have their own shapes; go-redis returns them as float64, maps and
// nested arrays, so a flattened or stringified reply does not compare
// equal).
func differentialThroughCluster(t *testing.T, proto int) {
	files, _ := filepath.Glob("../kv/testdata/diff/*.txt")
	own, _ := filepath.Glob("testdata/diff/*.txt")
	if len(files) == 0 || len(own) == 0 {
		t.Fatal("no differential test data in internal/kv/testdata/diff or internal/server/testdata/diff")
	}
	files = append(files, own...)
	rc := kvdiff.StartRedis(t)
	c := newTestCluster(t, 3)
	lead := c.waitLeader()
	follower := uint64(1)
	if follower == lead {
		follower = 2
	}
	ctx := testCtx(t, 5*time.Minute)
	kcl := redis.NewClient(&redis.Options{Addr: c.node(follower).ClientAddr(), Protocol: proto, MaxRetries: -1})
	defer kcl.Close()
	kc := kcl.Conn()
	defer kc.Close()
	rcl := redis.NewClient(&redis.Options{Addr: rc.Options().Addr, Protocol: proto})
	defer rcl.Close()
	rcc := rcl.Conn()
	defer rcc.Close()
	total := 0
	for _, file := range files {
		seqs, err := kvdiff.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, seq := range seqs {
			rcc.Do(ctx, "DISCARD")
			kc.Do(ctx, "DISCARD")
			rcc.Do(ctx, "UNWATCH")
			kc.Do(ctx, "UNWATCH")
			rcc.FlushAll(ctx)
			kc.FlushAll(ctx)
			for _, cmd := range seq {
				iargs := make([]any, len(cmd.Args))
				for i, a := range cmd.Args {
					iargs[i] = a
				}
				name := strings.ToUpper(cmd.Args[0])
				wv, werr := rcc.Do(ctx, iargs...).Result()
				gv, gerr := kc.Do(ctx, iargs...).Result()
				want, got := kvdiff.Normalize(name, wv, werr), kvdiff.Normalize(name, gv, gerr)
				total++
				if !reflect.DeepEqual(want, got) {
					t.Errorf("%s:%d: %s\n  redis:  %#v\n  kvorum: %#v", filepath.Base(file), cmd.Line, cmd.Text, want, got)
				}
			}
		}
	}
	t.Logf("%d commands compared", total)
}
