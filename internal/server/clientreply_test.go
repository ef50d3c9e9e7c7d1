package server

import (
	"bufio"
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/kvdiff"
	"github.com/kvorum/kvorum/internal/resp/codec"
)

// TestClientReplyLikeRedis: CLIENT REPLY ON|OFF|SKIP silences replies as
// redis-server does: each sequence is pipelined on a fresh connection to
// a kvorum follower and to redis-server, and the bytes that come back
// must be the same.
func TestClientReplyLikeRedis(t *testing.T) {
	ref := kvdiff.StartServer(t)
	c := newTestCluster(t, 3)
	kv := c.node(followersOf(c.waitLeader(), 3)[0]).ClientAddr()
	sequences := []string{
		"SET a 1;SET b 2",
		"CLIENT REPLY OFF;SET a 3;GET a;CLIENT REPLY ON;GET a",
		"CLIENT REPLY SKIP;SET b 4;GET b",
		"CLIENT REPLY SKIP;CLIENT REPLY SKIP;GET a;GET b",
		"CLIENT REPLY FOO;CLIENT REPLY;CLIENT REPLY ON x",
		"CLIENT REPLY OFF;NOSUCHCOMMAND;LPUSH a x;CLIENT REPLY ON",
		"CLIENT REPLY SKIP;CLIENT REPLY ON;GET a",
		"CLIENT REPLY OFF;CLIENT REPLY SKIP;GET a;CLIENT REPLY ON;GET b",
		"CLIENT REPLY SKIP;INCR n;CLIENT REPLY SKIP;INCR n;GET n",
	}
	for _, seq := range sequences {
		want := pipelined(t, ref, seq)
		got := pipelined(t, kv, seq)
		if got != want {
			t.Errorf("%s:\nkvorum       %q\nredis-server %q", seq, got, want)
		}
	}
}

// pipelined sends the commands of seq (";" between commands, " " between
// arguments) in one write on a new connection, then ECHO of a marker, and
// returns everything read before the marker's reply.
func pipelined(t *testing.T, addr, seq string) string {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	var b []byte
	for _, cmd := range append(strings.Split(seq, ";"), "ECHO end-of-sequence") {
		var args [][]byte
		for _, a := range strings.Fields(cmd) {
			args = append(args, []byte(a))
		}
		b = codec.AppendCommand(b, args...)
	}
	if _, err := nc.Write(b); err != nil {
		t.Fatal(err)
	}
	marker := []byte("$15\r\nend-of-sequence\r\n")
	var got []byte
	br := bufio.NewReader(nc)
	for !bytes.HasSuffix(got, marker) {
		c, err := br.ReadByte()
		if err != nil {
			t.Fatalf("%s on %s: %v after %q", seq, addr, err, got)
		}
		got = append(got, c)
	}
	return string(got[:len(got)-len(marker)])
}
