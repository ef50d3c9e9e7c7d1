package server

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The end-to-end differential test: the command sequences of
// internal/kv/testdata/diff/*.txt are sent with go-redis to a 3-node kvorum
// cluster (through a follower, so forwarding is exercised too) and to a
// real redis-server, and the replies must be identical.

func startRedis(t *testing.T) *redis.Client {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server not found: apt-get install redis-server (make test does this)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(path, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	cl := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), Protocol: 2})
	t.Cleanup(func() { cl.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for cl.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cl
}

// splitArgs splits a line into arguments; double quotes group, with \" and
// \\ escapes inside.
func splitArgs(line string) ([]string, error) {
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
		return nil, fmt.Errorf("unbalanced quotes")
	}
	if have {
		args = append(args, cur.String())
	}
	return args, nil
}

// normalize turns a go-redis reply into a comparable value; arrays of
// commands whose order is unspecified (KEYS, SMEMBERS-like) are sorted.
func normalize(cmd string, v any, err error) any {
	if err != nil {
		if err == redis.Nil {
			return "<nil>"
		}
		return "ERR:" + err.Error()
	}
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = normalize("", x[i], nil)
		}
		if cmd == "KEYS" {
			sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i]) < fmt.Sprint(out[j]) })
		}
		return out
	case nil:
		return "<nil>"
	}
	return v
}

func TestDifferentialAgainstRedisThroughCluster(t *testing.T) {
	files, _ := filepath.Glob("../kv/testdata/diff/*.txt")
	if len(files) == 0 {
		t.Fatal("no differential test data in internal/kv/testdata/diff")
	}
	rc := startRedis(t)
	c := newTestCluster(t, 3)
	lead := c.waitLeader()
	follower := uint64(1)
	if follower == lead {
		follower = 2
	}
	kc := c.client(follower)
	ctx := testCtx(t, 5*time.Minute)
	total := 0
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		lineNo := 0
		fresh := true
		for sc.Scan() {
			lineNo++
			line := strings.TrimSpace(sc.Text())
			if line == "" {
				fresh = true
				continue
			}
			if strings.HasPrefix(line, "#") {
				continue
			}
			if fresh {
				rc.FlushAll(ctx)
				kc.FlushAll(ctx)
				fresh = false
			}
			args, err := splitArgs(line)
			if err != nil || len(args) == 0 {
				t.Fatalf("%s:%d: bad line %q: %v", file, lineNo, line, err)
			}
			iargs := make([]any, len(args))
			for i, a := range args {
				iargs[i] = a
			}
			name := strings.ToUpper(args[0])
			wv, werr := rc.Do(ctx, iargs...).Result()
			gv, gerr := kc.Do(ctx, iargs...).Result()
			want, got := normalize(name, wv, werr), normalize(name, gv, gerr)
			total++
			if !reflect.DeepEqual(want, got) {
				t.Errorf("%s:%d: %s\n  redis:  %#v\n  kvorum: %#v", filepath.Base(file), lineNo, line, want, got)
			}
		}
		f.Close()
	}
	t.Logf("%d commands compared", total)
}
