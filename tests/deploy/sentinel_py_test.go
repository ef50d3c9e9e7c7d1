package deploy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// pythonWithRedis is Debian's python3, where python3-redis installs
// redis-py (a python3 earlier on PATH may lack it).
const pythonWithRedis = "/usr/bin/python3"

// redisPy drives tests/process/testdata/redis_py_sentinel.py: redis-py's
// Sentinel client, given the published ports as sentinels, writes keys
// py-0..py-99 through its master, with a kill of that master after the
// 30th.
type redisPy struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	out    strings.Builder
	ready  string // the master it named before the kill
	stderr strings.Builder
}

// startRedisPySentinel starts the script and waits for its 30 writes. It
// returns nil (and logs why) without python3 and redis-py, unless CI is
// set, when it fails the test.
func startRedisPySentinel(t *testing.T, ctx context.Context, sentinels []string) *redisPy {
	t.Helper()
	if err := exec.Command(pythonWithRedis, "-c", "import redis.sentinel").Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("python3 with redis-py (python3-redis) is needed: %v", err)
		}
		t.Logf("no python3 with redis-py: the redis-py Sentinel client is left out (%v)", err)
		return nil
	}
	p := &redisPy{t: t, lines: make(chan string, 16)}
	p.cmd = exec.CommandContext(ctx, pythonWithRedis, append([]string{"-u", "../process/testdata/redis_py_sentinel.py", "kvorum"}, sentinels...)...)
	p.cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	p.cmd.Stderr = &p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	for line := range p.lines {
		p.out.WriteString(line + "\n")
		if f := strings.Fields(line); len(f) == 2 && f[0] == "READY-FOR-KILL" {
			p.ready = f[1]
			return p
		}
	}
	p.cmd.Wait()
	t.Fatalf("redis-py Sentinel script ended before its first 30 writes:\n%s%s", p.out.String(), p.stderr.String())
	return nil
}

// master is the master the script wrote its first 30 keys through.
func (p *redisPy) master() string { return p.ready }

// killed tells the script its master was killed.
func (p *redisPy) killed() { _, _ = io.WriteString(p.stdin, "KILLED\n") }

// acked waits for the script's end and returns the writes it had
// acknowledged (key -> value).
func (p *redisPy) acked() map[string]string {
	p.t.Helper()
	var keys []string
	for line := range p.lines {
		p.out.WriteString(line + "\n")
		if rest, ok := strings.CutPrefix(line, "ACKED "); ok {
			if err := json.Unmarshal([]byte(rest), &keys); err != nil {
				p.t.Errorf("ACKED line: %v", err)
			}
		}
	}
	err := p.cmd.Wait()
	p.t.Logf("redis-py Sentinel client:\n%s%s", p.out.String(), p.stderr.String())
	if err != nil || len(keys) != 100 {
		p.t.Fatalf("redis-py Sentinel script: %v; %d keys acknowledged, want 100", err, len(keys))
	}
	want := map[string]string{}
	for _, k := range keys {
		var i int
		if _, err := fmt.Sscanf(k, "py-%d", &i); err != nil {
			p.t.Fatalf("acknowledged key %q", k)
		}
		want[k] = fmt.Sprintf("v%d", i)
	}
	return want
}
