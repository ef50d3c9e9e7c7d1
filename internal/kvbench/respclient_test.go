package kvbench

import (
	"bufio"
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/kvorum/kvorum/internal/localsrv"
)

// redisForTest starts a redis-server (no persistence) on a free port for
// the test and stops it at the end.
func redisForTest(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server not found: apt-get install redis-server (make test does this, via scripts/ensure-test-deps.sh)")
	}
	addrs, procs, err := localsrv.RedisServers(context.Background(), bin, t.TempDir(), "redis", 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = localsrv.StopAll(procs) })
	return addrs[0]
}

// The raw RESP client against a real redis-server: pipelined SETs and
// GETs, a miss, an error reply in the middle of a pipeline (the rest still
// answered), and no allocation per operation.
func TestRESPClient(t *testing.T) {
	addr := redisForTest(t)
	value := []byte(strings.Repeat("v", 3000)) // larger than one bufio fill of a small reply
	c, err := dialRESP(context.Background(), addr, value)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	ops := []op{{KindUpdate, 1}, {KindInsert, 2}, {KindRead, 1}, {KindRead, 3}, {KindRead, 2}}
	res := make([]opResult, len(ops))
	if err := c.batch(ops, res); err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.err != nil || r.lat <= 0 || r.miss != (i == 3) {
			t.Errorf("op %d: %+v", i, r)
		}
	}
	// The value really is there, under YCSB's key.
	got, err := c.do("GET", string(AppendKey(nil, 2)))
	if err != nil || got != string(value) {
		t.Fatalf("GET: %d bytes, %v", len(got), err)
	}
	if n, err := c.do("STRLEN", string(AppendKey(nil, 1))); err != nil || n != "3000" {
		t.Fatalf("STRLEN: %q %v", n, err)
	}
	// A list under record 5's key: GET gets WRONGTYPE, the next ops of the
	// pipeline are still answered.
	if _, err := c.do("RPUSH", string(AppendKey(nil, 5)), "a"); err != nil {
		t.Fatal(err)
	}
	ops = []op{{KindRead, 5}, {KindRead, 1}, {KindUpdate, 5}}
	res = res[:3]
	if err := c.batch(ops, res); err != nil {
		t.Fatal(err)
	}
	if res[0].err == nil || !strings.HasPrefix(res[0].err.Error(), "WRONGTYPE") || res[1].err != nil || res[1].miss || res[2].err != nil {
		t.Errorf("results %+v", res)
	}
	// No allocation per operation on the hot path.
	ops = make([]op, 16)
	for i := range ops {
		ops[i] = op{uint8(i % 2), uint64(i)}
	}
	res = make([]opResult, 16)
	allocs := testing.AllocsPerRun(50, func() {
		if err := c.batch(ops, res); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per batch of 16", allocs)
	}
	// A closed connection is a connection error for every op of the batch.
	c.nc.Close()
	if err := c.batch(ops[:2], res[:2]); err == nil || res[0].err == nil || res[1].err == nil {
		t.Errorf("batch on a closed connection: %v %+v", err, res[:2])
	}
}

// readReply skips every RESP2 and RESP3 reply type, nested.
func TestReadReply(t *testing.T) {
	in := "+OK\r\n:12\r\n$3\r\nabc\r\n$-1\r\n*2\r\n$1\r\na\r\n*1\r\n:1\r\n*-1\r\n_\r\n%1\r\n+k\r\n$1\r\nv\r\n" +
		"-ERR bad\r\n!5\r\nERR x\r\n,1.5\r\n#t\r\n(123\r\n=7\r\ntxt:abc\r\n~1\r\n+m\r\n"
	c := &respConn{addr: "test"}
	c.r = bufioReader(in)
	want := []struct {
		isNil bool
		err   string
	}{{}, {}, {}, {isNil: true}, {}, {isNil: true}, {isNil: true}, {}, {err: "ERR bad"}, {err: "ERR x"}, {}, {}, {}, {}, {}}
	for i, w := range want {
		isNil, err := c.readReply()
		es := ""
		if err != nil {
			es = err.Error()
		}
		if isNil != w.isNil || es != w.err {
			t.Errorf("reply %d: nil %v err %q, want %v %q", i, isNil, es, w.isNil, w.err)
		}
	}
	for _, bad := range []string{"?x\r\n", "$x\r\n", "+OK\n", "*-2\r\n"} {
		c.r = bufioReader(bad)
		if _, err := c.readReply(); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func bufioReader(s string) *bufio.Reader { return bufio.NewReader(strings.NewReader(s)) }
