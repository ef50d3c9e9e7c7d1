package kv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/redis/go-redis/v9"
)

// TestDifferentialKV runs the sequences of testdata/diff/*.txt (format in
// testdata/diff/README.md) against a real redis-server and against the
// state machine directly (Check, then Apply or Read at the real clock), and
// requires identical replies.
func TestDifferentialKV(t *testing.T) {
	files, err := filepath.Glob("testdata/diff/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatal("no differential test data in testdata/diff")
	}
	rc := startRedisServer(t)
	db := openMem(t)
	ctx := context.Background()
	total := 0
	for _, file := range files {
		seqs, err := readDiffFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, seq := range seqs {
			if err := rc.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if r := runKV(db, []string{"FLUSHALL"}); r.IsError() {
				t.Fatal(string(r.Str))
			}
			for _, c := range seq {
				iargs := make([]any, len(c.args))
				for i, a := range c.args {
					iargs[i] = a
				}
				name := strings.ToUpper(c.args[0])
				wv, werr := rc.Do(ctx, iargs...).Result()
				want := normalizeRedis(name, wv, werr)
				got := normalizeKV(name, runKV(db, c.args))
				total++
				if !reflect.DeepEqual(want, got) {
					t.Errorf("%s:%d: %s\n  redis: %#v\n  kv:    %#v", filepath.Base(file), c.line, c.text, want, got)
				}
			}
		}
	}
	t.Logf("%d commands compared", total)
}

type diffCmd struct {
	line int
	text string
	args []string
}

// readDiffFile parses a testdata/diff file into sequences of commands.
func readDiffFile(file string) ([][]diffCmd, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var seqs [][]diffCmd
	var cur []diffCmd
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			if len(cur) > 0 {
				seqs = append(seqs, cur)
				cur = nil
			}
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		args, err := splitDiffArgs(line)
		if err != nil || len(args) == 0 {
			return nil, fmt.Errorf("%s:%d: bad line %q: %v", file, lineNo, line, err)
		}
		cur = append(cur, diffCmd{line: lineNo, text: line, args: args})
	}
	if len(cur) > 0 {
		seqs = append(seqs, cur)
	}
	return seqs, sc.Err()
}

// splitDiffArgs splits a line into arguments: spaces separate, double quotes
// group, and inside quotes \" \\ \n \r \t \0 are escapes.
func splitDiffArgs(line string) ([]string, error) {
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

// runKV executes one command on the state machine the way a node does:
// Check, then Apply in an indexed batch (committed) or Read.
func runKV(db *pebble.DB, sargs []string) Reply {
	args := make([][]byte, len(sargs))
	for i, a := range sargs {
		args[i] = []byte(a)
	}
	now := time.Now().UnixMilli()
	if r, ok := Check(args, Limits{}); !ok {
		return r
	}
	spec := Lookup(args[0])
	if !spec.Write {
		return Read(db, args, now)
	}
	b := db.NewIndexedBatch()
	r := Apply(b, args, now)
	if err := b.Commit(pebble.NoSync); err != nil {
		return Error("ERR commit: " + err.Error())
	}
	return r
}

// Normalized replies: "<nil>", int64, string, "ERR:<text>" for errors,
// []any for arrays. Arrays of commands whose order Redis leaves
// unspecified are sorted.
func normalizeRedis(cmd string, v any, err error) any {
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
			out[i] = normalizeRedis("", x[i], nil)
		}
		return sortUnordered(cmd, out)
	case nil:
		return "<nil>"
	case redis.Error:
		return "ERR:" + x.Error()
	}
	return v
}

func normalizeKV(cmd string, r Reply) any {
	switch r.Kind {
	case KindNil, KindNilArray:
		return "<nil>"
	case KindError:
		return "ERR:" + string(r.Str)
	case KindInt, KindBool:
		return r.Int
	case KindStatus, KindBulk, KindVerbatim:
		return string(r.Str)
	case KindDouble:
		return fmt.Sprint(r.Float)
	case KindArray, KindSet, KindMap:
		out := make([]any, len(r.Elems))
		for i := range r.Elems {
			out[i] = normalizeKV("", r.Elems[i])
		}
		return sortUnordered(cmd, out)
	}
	return fmt.Sprintf("<kind %d>", r.Kind)
}

func sortUnordered(cmd string, out []any) []any {
	byStr := func(s []any) {
		sort.Slice(s, func(i, j int) bool { return fmt.Sprint(s[i]) < fmt.Sprint(s[j]) })
	}
	switch cmd {
	case "KEYS":
		byStr(out)
	case "SCAN":
		if len(out) == 2 {
			if keys, ok := out[1].([]any); ok {
				byStr(keys)
			}
		}
	}
	return out
}

func openMem(t testing.TB) *pebble.DB {
	t.Helper()
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// startRedisServer starts a private redis-server on a free port; it is
// killed when the test ends.
func startRedisServer(t *testing.T) *redis.Client {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server not found: apt-get install redis-server")
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

// quietLogger drops pebble's informational logging in tests.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)           {}
func (quietLogger) Errorf(string, ...any)          {}
func (quietLogger) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }

// TestGlobAgainstRedis compares KEYS with random patterns (all of glob's
// special characters) over random keys with redis-server's answers.
func TestGlobAgainstRedis(t *testing.T) {
	rc := startRedisServer(t)
	db := openMem(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	word := func(alpha string, max int) string {
		b := make([]byte, rng.IntN(max+1))
		for i := range b {
			b[i] = alpha[rng.IntN(len(alpha))]
		}
		return string(b)
	}
	for round := 0; round < 20; round++ {
		rc.FlushAll(ctx)
		runKV(db, []string{"FLUSHALL"})
		for i := 0; i < 30; i++ {
			k := word("abAB-]^\\*?[", 5)
			rc.Set(ctx, k, "v", 0)
			runKV(db, []string{"SET", k, "v"})
		}
		for i := 0; i < 100; i++ {
			pat := word("abAB*?[]^-\\", 7)
			wv, werr := rc.Do(ctx, "KEYS", pat).Result()
			want := normalizeRedis("KEYS", wv, werr)
			got := normalizeKV("KEYS", runKV(db, []string{"KEYS", pat}))
			if !reflect.DeepEqual(want, got) {
				t.Fatalf("KEYS %q\n  redis: %q\n  kv:    %q", pat, want, got)
			}
		}
	}
}

// TestSpecsMatchRedis compares every Spec's arity, flags and key positions
// with redis-server's COMMAND INFO.
func TestSpecsMatchRedis(t *testing.T) {
	rc := startRedisServer(t)
	ctx := context.Background()
	for _, s := range Commands() {
		v, err := rc.Do(ctx, "COMMAND", "INFO", s.Name).Result()
		if err != nil {
			t.Fatal(err)
		}
		info, ok := v.([]any)
		if !ok || len(info) != 1 {
			t.Fatalf("%s: COMMAND INFO: %#v", s.Name, v)
		}
		e, ok := info[0].([]any)
		if !ok || len(e) < 6 {
			t.Errorf("%s: not a Redis command", s.Name)
			continue
		}
		var flags []string
		for _, f := range e[2].([]any) {
			flags = append(flags, fmt.Sprint(f))
		}
		want := fmt.Sprint(e[1], flags, e[3], e[4], e[5])
		got := fmt.Sprint(int64(s.Arity), s.Flags, int64(s.FirstKey), int64(s.LastKey), int64(s.Step))
		if got != want {
			t.Errorf("%s: spec %s, redis %s", s.Name, got, want)
		}
	}
}
