package rdb

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// startRedis starts a redis-server on a free loopback port, killed at the
// end of the test; it returns a client and the server's directory.
func startRedis(t testing.TB, extra ...string) (*redis.Client, string) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skip("redis-server not on PATH")
		}
		t.Fatal("redis-server not on PATH (and CI is set)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout = nil
	cmd.Stderr = nil
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), Protocol: 2})
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := c.Ping(ctx).Err(); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("redis-server did not start: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return c, dir
}

func parseID(s string) (StreamID, error) {
	ms, seq, ok := strings.Cut(s, "-")
	if !ok {
		return StreamID{}, fmt.Errorf("bad stream ID %q", s)
	}
	a, err := strconv.ParseUint(ms, 10, 64)
	if err != nil {
		return StreamID{}, err
	}
	b, err := strconv.ParseUint(seq, 10, 64)
	return StreamID{a, b}, err
}

// kv turns a RESP2 field list into a map.
func kv(x any) map[string]any {
	m := map[string]any{}
	l, _ := x.([]any)
	for i := 0; i+1 < len(l); i += 2 {
		k, _ := l[i].(string)
		m[k] = l[i+1]
	}
	return m
}

func asInt(x any) int64 {
	switch v := x.(type) {
	case int64:
		return v
	case string:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	return -1 // nil
}

// fetchValue reads a key's value with ordinary commands.
func fetchValue(ctx context.Context, c *redis.Client, key string) (*Value, error) {
	return fetchValueConn(ctx, c, key)
}

// cmdable is a client or a connection.
type cmdable interface {
	redis.Cmdable
	Do(ctx context.Context, args ...any) *redis.Cmd
}

func fetchValueConn(ctx context.Context, c cmdable, key string) (*Value, error) {
	typ, err := c.Type(ctx, key).Result()
	if err != nil {
		return nil, err
	}
	switch typ {
	case "string":
		s, err := c.Get(ctx, key).Result()
		return &Value{Kind: KindString, String: []byte(s)}, err
	case "list":
		l, err := c.LRange(ctx, key, 0, -1).Result()
		v := &Value{Kind: KindList, List: [][]byte{}}
		for _, s := range l {
			v.List = append(v.List, []byte(s))
		}
		return v, err
	case "set":
		l, err := c.SMembers(ctx, key).Result()
		v := &Value{Kind: KindSet, Set: [][]byte{}}
		for _, s := range l {
			v.Set = append(v.Set, []byte(s))
		}
		return v, err
	case "hash":
		// The raw reply keeps Redis's order.
		raw, err := c.Do(ctx, "HGETALL", key).Result()
		v := &Value{Kind: KindHash, Hash: []Field{}}
		l := list(raw)
		for i := 0; i+1 < len(l); i += 2 {
			v.Hash = append(v.Hash, Field{[]byte(l[i].(string)), []byte(l[i+1].(string))})
		}
		return v, err
	case "zset":
		l, err := c.ZRangeWithScores(ctx, key, 0, -1).Result()
		v := &Value{Kind: KindZSet, ZSet: []ZMember{}}
		for _, z := range l {
			v.ZSet = append(v.ZSet, ZMember{[]byte(z.Member.(string)), z.Score})
		}
		return v, err
	case "stream":
		return fetchStream(ctx, c, key)
	}
	return nil, fmt.Errorf("type %q", typ)
}

func fetchStream(ctx context.Context, c cmdable, key string) (*Value, error) {
	s := &Stream{Entries: []StreamEntry{}}
	msgs, err := c.XRange(ctx, key, "-", "+").Result()
	if err != nil {
		return nil, err
	}
	raw, err := c.Do(ctx, "XRANGE", key, "-", "+").Result()
	if err != nil {
		return nil, err
	}
	// XRange's map loses the order of fields: use the raw reply.
	for i, e := range raw.([]any) {
		pair := e.([]any)
		id, err := parseID(pair[0].(string))
		if err != nil {
			return nil, err
		}
		ent := StreamEntry{ID: id}
		for _, f := range pair[1].([]any) {
			ent.Fields = append(ent.Fields, []byte(f.(string)))
		}
		if msgs[i].ID != pair[0].(string) {
			return nil, fmt.Errorf("XRANGE replies differ")
		}
		s.Entries = append(s.Entries, ent)
	}
	info, err := c.Do(ctx, "XINFO", "STREAM", key, "FULL", "COUNT", "0").Result()
	if err != nil {
		return nil, err
	}
	m := kv(info)
	for name, dst := range map[string]*StreamID{"last-generated-id": &s.LastID, "max-deleted-entry-id": &s.MaxDeletedID, "recorded-first-entry-id": &s.FirstID} {
		if *dst, err = parseID(m[name].(string)); err != nil {
			return nil, err
		}
	}
	s.EntriesAdded = uint64(asInt(m["entries-added"]))
	for _, gx := range list(m["groups"]) {
		gm := kv(gx)
		g := StreamGroup{Name: []byte(gm["name"].(string)), EntriesRead: asInt(gm["entries-read"])}
		if g.LastID, err = parseID(gm["last-delivered-id"].(string)); err != nil {
			return nil, err
		}
		for _, px := range list(gm["pending"]) {
			p := px.([]any)
			id, err := parseID(p[0].(string))
			if err != nil {
				return nil, err
			}
			g.Pending = append(g.Pending, PendingEntry{ID: id, Consumer: []byte(p[1].(string)), DeliveryMs: asInt(p[2]), DeliveryCount: uint64(asInt(p[3]))})
		}
		for _, cx := range list(gm["consumers"]) {
			cm := kv(cx)
			g.Consumers = append(g.Consumers, Consumer{Name: []byte(cm["name"].(string)), SeenMs: asInt(cm["seen-time"])})
		}
		s.Groups = append(s.Groups, g)
	}
	return &Value{Kind: KindStream, Stream: s}, nil
}

// normalize returns a copy of v with its unordered parts sorted and its
// empty slices nil.
func normalize(v *Value) *Value {
	if v == nil {
		return nil
	}
	n := *v
	nz := func(b []byte) []byte {
		if len(b) == 0 {
			return nil
		}
		return b
	}
	n.String = nz(n.String)
	n.List = nil
	for _, e := range v.List {
		n.List = append(n.List, nz(e))
	}
	n.Set = nil
	for _, e := range v.Set {
		n.Set = append(n.Set, nz(e))
	}
	sort.Slice(n.Set, func(i, j int) bool { return bytes.Compare(n.Set[i], n.Set[j]) < 0 })
	n.Hash = nil
	for _, f := range v.Hash {
		n.Hash = append(n.Hash, Field{nz(f.Name), nz(f.Value)})
	}
	sort.Slice(n.Hash, func(i, j int) bool { return bytes.Compare(n.Hash[i].Name, n.Hash[j].Name) < 0 })
	n.ZSet = nil
	for _, z := range v.ZSet {
		n.ZSet = append(n.ZSet, ZMember{nz(z.Member), z.Score})
	}
	sort.Slice(n.ZSet, func(i, j int) bool { return zsetLess(n.ZSet[i], n.ZSet[j]) })
	if v.Stream != nil {
		s := *v.Stream
		s.Entries = nil
		for _, e := range v.Stream.Entries {
			var f [][]byte
			for _, x := range e.Fields {
				f = append(f, nz(x))
			}
			s.Entries = append(s.Entries, StreamEntry{e.ID, f})
		}
		s.Groups = nil
		for _, g := range v.Stream.Groups {
			g2 := g
			g2.Name = nz(g.Name)
			g2.Pending = nil
			for _, p := range g.Pending {
				p.Consumer = nz(p.Consumer)
				g2.Pending = append(g2.Pending, p)
			}
			sort.Slice(g2.Pending, func(i, j int) bool { return idLess(g2.Pending[i].ID, g2.Pending[j].ID) })
			g2.Consumers = nil
			for _, c := range g.Consumers {
				c.Name = nz(c.Name)
				g2.Consumers = append(g2.Consumers, c)
			}
			sort.Slice(g2.Consumers, func(i, j int) bool { return bytes.Compare(g2.Consumers[i].Name, g2.Consumers[j].Name) < 0 })
			s.Groups = append(s.Groups, g2)
		}
		sort.Slice(s.Groups, func(i, j int) bool { return bytes.Compare(s.Groups[i].Name, s.Groups[j].Name) < 0 })
		n.Stream = &s
	}
	return &n
}

// diffValues describes how a and b differ logically ("" if equal).
func diffValues(a, b *Value) string {
	na, nb := normalize(a), normalize(b)
	if equalNormalized(na, nb) {
		return ""
	}
	sa, sb := dump(na), dump(nb)
	if sa == sb {
		return ""
	}
	if len(sa) > 400 || len(sb) > 400 {
		for i := 0; i < len(sa) && i < len(sb); i++ {
			if sa[i] != sb[i] {
				lo := max(0, i-100)
				return fmt.Sprintf("differ at %d:\n%s\n%s", i, sa[lo:min(len(sa), i+200)], sb[lo:min(len(sb), i+200)])
			}
		}
		return fmt.Sprintf("lengths %d vs %d", len(sa), len(sb))
	}
	return sa + "\n" + sb
}

// dump renders a normalized value as comparable text.
func dump(v *Value) string {
	if v == nil {
		return "<nil>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%v %q %q %q", v.Kind, v.String, v.List, v.Set)
	for _, f := range v.Hash {
		fmt.Fprintf(&b, " %q=%q", f.Name, f.Value)
	}
	for _, z := range v.ZSet {
		fmt.Fprintf(&b, " %q:%v", z.Member, z.Score)
	}
	if s := v.Stream; s != nil {
		fmt.Fprintf(&b, " last=%v first=%v maxdel=%v added=%d", s.LastID, s.FirstID, s.MaxDeletedID, s.EntriesAdded)
		for _, e := range s.Entries {
			fmt.Fprintf(&b, " %v%q", e.ID, e.Fields)
		}
		for _, g := range s.Groups {
			fmt.Fprintf(&b, " group %q last=%v read=%d", g.Name, g.LastID, g.EntriesRead)
			for _, p := range g.Pending {
				fmt.Fprintf(&b, " pel %v %q %d %d", p.ID, p.Consumer, p.DeliveryMs, p.DeliveryCount)
			}
			for _, c := range g.Consumers {
				fmt.Fprintf(&b, " consumer %q %d", c.Name, c.SeenMs)
			}
		}
	}
	return b.String()
}

// testdataDir is where generated seed payloads go (none are committed).
var _ = filepath.Join

func list(x any) []any {
	l, _ := x.([]any)
	return l
}

func equalByteSlices(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// equalNormalized compares normalized values quickly.
func equalNormalized(a, b *Value) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Kind != b.Kind || !bytes.Equal(a.String, b.String) || !equalByteSlices(a.List, b.List) || !equalByteSlices(a.Set, b.Set) ||
		len(a.Hash) != len(b.Hash) || len(a.ZSet) != len(b.ZSet) || (a.Stream == nil) != (b.Stream == nil) {
		return false
	}
	for i := range a.Hash {
		if !bytes.Equal(a.Hash[i].Name, b.Hash[i].Name) || !bytes.Equal(a.Hash[i].Value, b.Hash[i].Value) {
			return false
		}
	}
	for i := range a.ZSet {
		if !bytes.Equal(a.ZSet[i].Member, b.ZSet[i].Member) || a.ZSet[i].Score != b.ZSet[i].Score {
			return false
		}
	}
	if a.Stream != nil {
		return dump(a) == dump(b)
	}
	return true
}
