package server

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/kvorum/kvorum/internal/kvdiff"
)

var notifyFiles = flag.String("notify.files", "*.txt", "the files of testdata/notify that TestKeyspaceNotificationsLikeRedis runs (a glob)")

// TestKeyspaceNotificationsLikeRedis is the differential test of keyspace
// notifications: the commands of testdata/notify/*.txt run one by one,
// and after each the messages that subscribers of __keyspace@0__:* and
// __keyevent@0__:* received (channel and message, in order) must be the
// ones recorded from redis-server below it. On kvorum the commands go
// through a follower and the subscribers are on the two other nodes, one
// speaking RESP2 and one RESP3: every node emits the events at apply.
//
// The files use the differential files' directives (sequence, run; see
// internal/kv/testdata/diff/README.md); "sequence" also sets
// notify-keyspace-events back to KEA, and "run" may hold SLEEP <ms>
// instead of a command (both sides wait, for events of expiry). With
// -rewrite the files are recorded again from redis-server; without it,
// but with redis-server installed, redis-server is checked against them
// too.
func TestKeyspaceNotificationsLikeRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("a long comparison with redis-server, run by make unit; skipped under make race's -short (CI time)")
	}
	files, _ := filepath.Glob("testdata/notify/" + *notifyFiles)
	if len(files) == 0 {
		t.Fatal("no test data in testdata/notify")
	}
	switch {
	case kvdiff.HaveRedis():
		t.Run("redis-server", func(t *testing.T) {
			addr := kvdiff.StartServer(t)
			ns := newNotifySide(t, addr, addr, addr)
			for _, file := range files {
				t.Run(filepath.Base(file), func(t *testing.T) {
					ns.reset(t)
					datadriven.RunTest(t, file, func(t *testing.T, d *datadriven.TestData) string {
						if d.Cmd == kvdiff.DirectiveSequence {
							ns.reset(t)
							return ""
						}
						args, err := kvdiff.RunArgs(d)
						if err != nil {
							d.Fatalf(t, "%v", err)
						}
						got := ns.run(t, args)
						if !d.Rewrite && got != d.Expected {
							d.Fatalf(t, "%s\n%s\nrecorded:\n%sredis-server now:\n%s", d.Input, kvdiff.RedisChanged, d.Expected, got)
						}
						return got
					})
				})
			}
		})
	case kvdiff.Rewriting():
		t.Fatal("-rewrite records redis-server's events, and redis-server is not installed: apt-get install redis-server")
	}
	if kvdiff.Rewriting() {
		return // the files are being recorded: nothing to compare kvorum with yet
	}
	c := newTestCluster(t, 3)
	lead := c.waitLeader()
	var ids []uint64 // the followers, then the leader
	for _, id := range []uint64{1, 2, 3} {
		if id != lead {
			ids = append(ids, id)
		}
	}
	ids = append(ids, lead)
	ns := newNotifySide(t, c.node(ids[0]).ClientAddr(), c.node(ids[1]).ClientAddr(), c.node(ids[2]).ClientAddr())
	total := 0
	for _, file := range files {
		seqs, err := kvdiff.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, seq := range seqs {
			ns.reset(t)
			for _, cmd := range seq {
				total++
				if got := ns.run(t, cmd.Args); got != cmd.Expected {
					t.Errorf("%s:%d: %s\nrecorded (redis-server):\n%skvorum:\n%s", file, cmd.Line, cmd.Text, cmd.Expected, got)
				}
			}
		}
	}
	t.Logf("%d commands compared", total)
}

// notifySide is one side of the notification test: a connection for
// commands and two subscribers (RESP2 and RESP3) of every keyspace and
// keyevent channel and of the sentinel channel.
type notifySide struct {
	cmd  *kvdiff.Conn
	mark *kvdiff.Conn // publishes the sentinels (cmd may be inside MULTI)
	subs []*notifySub
	n    int // sentinels sent
}

const notifySentinel = "notify-test-sentinel"

type notifySub struct {
	proto int
	c     net.Conn
	r     *bufio.Reader
}

func newNotifySide(t *testing.T, cmdAddr, sub2Addr, sub3Addr string) *notifySide {
	t.Helper()
	cmd, err := kvdiff.Dial(cmdAddr, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Close() })
	mark, err := kvdiff.Dial(cmdAddr, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mark.Close() })
	ns := &notifySide{cmd: cmd, mark: mark}
	for _, s := range []struct {
		addr  string
		proto int
	}{{sub2Addr, 2}, {sub3Addr, 3}} {
		c, err := net.DialTimeout("tcp", s.addr, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		sub := &notifySub{proto: s.proto, c: c, r: bufio.NewReader(c)}
		send := func(args ...string) {
			fmt.Fprintf(c, "*%d\r\n", len(args))
			for _, a := range args {
				fmt.Fprintf(c, "$%d\r\n%s\r\n", len(a), a)
			}
		}
		replies := 2 // the two subscription confirmations
		if s.proto == 3 {
			send("HELLO", "3")
			replies++
		}
		send("PSUBSCRIBE", "__key*__:*", notifySentinel)
		for i := 0; i < replies; i++ {
			if _, err := sub.read(); err != nil {
				t.Fatal(err)
			}
		}
		ns.subs = append(ns.subs, sub)
	}
	return ns
}

func (s *notifySub) read() (kvdiff.Value, error) {
	if err := s.c.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		return kvdiff.Value{}, err
	}
	return kvdiff.ReadValue(s.r)
}

// reset empties the keyspace (functions too) and sets notify-keyspace-events to KEA, then
// drains what that emitted (nothing, in Redis).
func (ns *notifySide) reset(t *testing.T) {
	t.Helper()
	for _, args := range [][]string{{"DISCARD"}, {"FLUSHALL"}, {"FUNCTION", "FLUSH"}, {"CONFIG", "SET", "notify-keyspace-events", "KEA"}} {
		if args[0] == "DISCARD" {
			ns.cmd.Do(args...) // leaves a MULTI the file left open; an error otherwise
			continue
		}
		if v, err := ns.cmd.Do(args...); err != nil || v.Type != '+' {
			t.Fatalf("%s: %v %s", strings.Join(args, " "), err, kvdiff.Render(v))
		}
	}
	if got := ns.events(t); got != "" {
		t.Fatalf("FLUSHALL and CONFIG SET emitted events:\n%s", got)
	}
}

// run executes one command (or SLEEP ms) and returns the events it
// caused, one "channel message" line each.
func (ns *notifySide) run(t *testing.T, args []string) string {
	t.Helper()
	if strings.EqualFold(args[0], "SLEEP") && len(args) == 2 {
		ms, err := strconv.Atoi(args[1])
		if err != nil {
			t.Fatalf("SLEEP %s", args[1])
		}
		time.Sleep(time.Duration(ms) * time.Millisecond)
	} else if _, err := ns.cmd.Do(args...); err != nil {
		t.Fatalf("%s: %v", kvdiff.String(args), err)
	}
	return ns.events(t)
}

// events publishes a sentinel and returns what the subscribers received
// before it, which must be the same on both.
func (ns *notifySide) events(t *testing.T) string {
	t.Helper()
	ns.n++
	mark := strconv.Itoa(ns.n)
	if _, err := ns.mark.Do("PUBLISH", notifySentinel, mark); err != nil {
		t.Fatal(err)
	}
	var first string
	for i, sub := range ns.subs {
		var b strings.Builder
		for {
			v, err := sub.read()
			if err != nil {
				t.Fatalf("RESP%d subscriber: %v (so far:\n%s)", sub.proto, err, b.String())
			}
			if len(v.Elems) != 4 || string(v.Elems[0].Str) != "pmessage" {
				t.Fatalf("RESP%d subscriber got %s", sub.proto, kvdiff.Render(v))
			}
			ch, msg := string(v.Elems[2].Str), string(v.Elems[3].Str)
			if ch == notifySentinel {
				if msg != mark {
					t.Fatalf("RESP%d subscriber got sentinel %s, want %s", sub.proto, msg, mark)
				}
				break
			}
			b.WriteString(kvdiff.String([]string{ch, msg}) + "\n")
		}
		if i == 0 {
			first = b.String()
		} else if b.String() != first {
			t.Fatalf("the RESP2 and RESP3 subscribers received different events:\n%s\nand\n%s", first, b.String())
		}
	}
	return first
}
