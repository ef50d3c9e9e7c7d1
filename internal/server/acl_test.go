package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvorum/kvorum/internal/resp"
)

// userClient is a client of node id authenticated as user (go-redis sends
// AUTH on every new connection).
func (c *testCluster) userClient(id uint64, user, pass string) *redis.Client {
	cl := redis.NewClient(&redis.Options{Addr: c.node(id).ClientAddr(), Username: user, Password: pass,
		Protocol: 2, MaxRetries: -1, PoolSize: 2, ReadTimeout: 10 * time.Second})
	c.t.Cleanup(func() { cl.Close() })
	return cl
}

func wantErrPrefix(t *testing.T, err error, prefix, what string) {
	t.Helper()
	if err == nil || !strings.HasPrefix(err.Error(), prefix) {
		t.Fatalf("%s: got %v, want an error starting %q", what, err, prefix)
	}
}

// TestACLUsersAreClusterState: a user made through one node is enforced
// by every node from the reply on (each applies the change), survives a
// restart of every node, and reaches a node that joins by snapshot.
func TestACLUsersAreClusterState(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := testCtx(t, 60*time.Second)
	admin := c.client(2)
	if err := admin.Do(ctx, "ACL", "SETUSER", "app", "on", ">s3cret", "~app:*", "+@all", "-flushall").Err(); err != nil {
		t.Fatal(err)
	}
	for id := uint64(1); id <= 3; id++ {
		cl := c.userClient(id, "app", "s3cret")
		key := fmt.Sprintf("app:%d", id)
		if err := cl.Set(ctx, key, "v", 0).Err(); err != nil {
			t.Fatalf("node %d: allowed write: %v", id, err)
		}
		wantErrPrefix(t, cl.Set(ctx, "other", "v", 0).Err(), "NOPERM", fmt.Sprintf("node %d: key outside ~app:*", id))
		wantErrPrefix(t, cl.FlushAll(ctx).Err(), "NOPERM", fmt.Sprintf("node %d: FLUSHALL", id))
		wantErrPrefix(t, c.userClient(id, "app", "wrong").Ping(ctx).Err(), "WRONGPASS", fmt.Sprintf("node %d: wrong password", id))
	}
	if n, _ := admin.Exists(ctx, "other").Result(); n != 0 {
		t.Fatal("a refused write changed the data")
	}
	// Restart every node: the users come back from the store.
	c.stopAll()
	for id := uint64(1); id <= 3; id++ {
		c.start(id)
	}
	c.waitLeader()
	for id := uint64(1); id <= 3; id++ {
		if err := c.userClient(id, "app", "s3cret").Get(ctx, "app:1").Err(); err != nil {
			t.Fatalf("node %d after restart: %v", id, err)
		}
	}
	// Enough writes that the log is truncated: node 4 catches up by snapshot.
	for i := 0; i < 150; i++ {
		if err := admin.Set(ctx, fmt.Sprintf("fill-%03d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	cfg := nodeConfig(t, 4, c.net)
	cfg.Join = c.node(1).PeerAddr()
	c.cfgs[4] = cfg
	c.start(4)
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := c.userClient(4, "app", "s3cret").Ping(ctx).Err()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the joined node does not know user app: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	wantErrPrefix(t, c.userClient(4, "app", "s3cret").Set(ctx, "other", "v", 0).Err(), "NOPERM", "joined node: key outside ~app:*")
}

// TestACLRequirePassAndChanges: nodes started with --requirepass refuse
// clients that have not authenticated; a DELUSER disconnects the user's
// clients on every node; a transaction queued before its user lost a
// command is answered with EXEC's NOPERM for that command.
func TestACLRequirePassAndChanges(t *testing.T) {
	c := newClusterWith(t, 3, func(_ uint64, cfg *Config) { cfg.RequirePass = "topsecret" })
	ctx := testCtx(t, 60*time.Second)
	anon := redis.NewClient(&redis.Options{Addr: c.node(1).ClientAddr(), MaxRetries: -1})
	defer anon.Close()
	wantErrPrefix(t, anon.Set(ctx, "k", "v", 0).Err(), "NOAUTH", "no AUTH")
	wantErrPrefix(t, anon.Do(ctx, "AUTH", "nope").Err(), "WRONGPASS", "wrong password")
	admin := c.userClient(1, "default", "topsecret")
	if err := admin.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(ctx, "ACL", "SETUSER", "eve", "on", ">pw", "~*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	// eve queues a transaction on node 3 ...
	eveConn := c.userClient(3, "eve", "pw").Conn()
	defer eveConn.Close()
	if err := eveConn.Do(ctx, "MULTI").Err(); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]any{{"SET", "k", "eve"}, {"GET", "k"}} {
		if err := eveConn.Do(ctx, cmd...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// ... and loses SET before EXEC.
	if err := admin.Do(ctx, "ACL", "SETUSER", "eve", "-set").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "node 3 applies eve's change", func() bool {
		d, err := c.userClient(3, "default", "topsecret").Do(ctx, "ACL", "DRYRUN", "eve", "set", "k", "x").Text()
		return err == nil && d != "OK"
	})
	// go-redis reports the first error element of EXEC's array as the
	// command's error.
	err := eveConn.Do(ctx, "EXEC").Err()
	if err == nil || !strings.HasPrefix(err.Error(), "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call") {
		t.Fatalf("EXEC with a refused SET: %v", err)
	}
	if v, err := admin.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("k = %q, %v: the refused SET must not run", v, err)
	}
	// DELUSER disconnects eve's clients on every node.
	eve2 := c.userClient(2, "eve", "pw")
	if err := eve2.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := admin.Do(ctx, "ACL", "DELUSER", "eve").Int(); err != nil || n != 1 {
		t.Fatalf("DELUSER: %d %v", n, err)
	}
	waitFor(t, 10*time.Second, "eve's connections are closed", func() bool {
		return eveConn.Ping(ctx).Err() != nil
	})
	if err := eve2.Ping(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS") && !errors.Is(err, context.DeadlineExceeded) {
		// A new connection of the pool re-authenticates and fails.
		t.Fatalf("eve after DELUSER: %v", err)
	}
}

// TestACLFileLoadSave: --aclfile users apply from the start; ACL SAVE
// writes the node's file and ACL LOAD replaces the cluster's users with it.
func TestACLFileLoadSave(t *testing.T) {
	dir := t.TempDir()
	files := map[uint64]string{}
	for id := uint64(1); id <= 3; id++ {
		files[id] = filepath.Join(dir, fmt.Sprintf("users-%d.acl", id))
		if err := os.WriteFile(files[id], []byte("user default on >adminpw ~* &* +@all\nuser ro on >ro ~* +@read\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := newClusterWith(t, 3, func(id uint64, cfg *Config) { cfg.ACLFile = files[id] })
	ctx := testCtx(t, 60*time.Second)
	ro := c.userClient(2, "ro", "ro")
	if err := ro.Get(ctx, "x").Err(); err != redis.Nil {
		t.Fatalf("GET as ro: %v", err)
	}
	wantErrPrefix(t, ro.Set(ctx, "x", "1", 0).Err(), "NOPERM", "SET as ro")
	admin := c.userClient(1, "default", "adminpw")
	if err := admin.Do(ctx, "ACL", "SETUSER", "rw", "on", ">rw", "~*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(ctx, "ACL", "SAVE").Err(); err != nil {
		t.Fatal(err)
	}
	saved, _ := os.ReadFile(files[1])
	if !strings.Contains(string(saved), "user rw on #") {
		t.Fatalf("ACL SAVE wrote:\n%s", saved)
	}
	// Node 3's file drops ro; ACL LOAD through node 3 makes it the cluster's.
	if err := os.WriteFile(files[3], []byte("user default on >adminpw ~* &* +@all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.userClient(3, "default", "adminpw").Do(ctx, "ACL", "LOAD").Err(); err != nil {
		t.Fatal(err)
	}
	for id := uint64(1); id <= 3; id++ {
		users, err := c.userClient(id, "default", "adminpw").Do(ctx, "ACL", "USERS").StringSlice()
		if err != nil || strings.Join(users, ",") != "default" {
			t.Fatalf("node %d users after ACL LOAD: %v %v", id, users, err)
		}
	}
	// A file that does not load changes nothing.
	if err := os.WriteFile(files[3], []byte("user x on +nosuchcommand\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wantErrPrefix(t, c.userClient(3, "default", "adminpw").Do(ctx, "ACL", "LOAD").Err(), "ERR /", "ACL LOAD of a bad file")
	if err := c.userClient(1, "default", "adminpw").Ping(ctx).Err(); err != nil {
		t.Fatalf("after a refused LOAD: %v", err)
	}
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestACLScriptCallsChecked: redis.call in EVAL, EVAL_RO, FCALL and a
// script inside MULTI is checked against the user who ran it, at apply
// time, with Redis's errors; a refused call writes nothing.
func TestACLScriptCallsChecked(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := testCtx(t, 60*time.Second)
	admin := c.client(1)
	for _, cmd := range [][]any{
		{"ACL", "SETUSER", "sc", "on", ">p", "~a*", "+@all"},
		{"ACL", "SETUSER", "noset", "on", ">p", "~*", "+@all", "-set"},
		{"FUNCTION", "LOAD", "#!lua name=lib\nredis.register_function('setb', function(keys, args) return redis.call('set', 'b', '1') end)\nredis.register_function{function_name='getb', callback=function(keys, args) return redis.call('get', 'b') end, flags={'no-writes'}}"},
	} {
		if err := admin.Do(ctx, cmd...).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	const keyErr = "ERR The user executing the script can't access at least one of the keys mentioned in the command arguments"
	const cmdErr = "ERR The user executing the script can't run this command or subcommand"
	for id := uint64(1); id <= 3; id++ {
		sc, noset := c.userClient(id, "sc", "p"), c.userClient(id, "noset", "p")
		for _, tc := range []struct {
			cl   *redis.Client
			args []any
			want string
		}{
			{sc, []any{"EVAL", "return redis.call('set','b','1')", "0"}, keyErr + " script: "},
			{sc, []any{"EVAL", "return redis.pcall('set','b','1')", "0"}, keyErr},
			{sc, []any{"EVAL_RO", "return redis.call('get','b')", "0"}, keyErr + " script: "},
			{sc, []any{"FCALL", "setb", "0"}, keyErr + " script: "},
			{sc, []any{"FCALL_RO", "getb", "0"}, keyErr + " script: "},
			{noset, []any{"EVAL", "return redis.call('set','b','1')", "0"}, cmdErr + " script: "},
		} {
			err := tc.cl.Do(ctx, tc.args...).Err()
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("node %d: %v: got %v, want %q...", id, tc.args, err, tc.want)
			}
		}
		if v, err := sc.Do(ctx, "EVAL", "return redis.call('set','a1','x')", "0").Text(); err != nil || v != "OK" {
			t.Fatalf("node %d: allowed script: %q %v", id, v, err)
		}
		// A script queued in a transaction is checked too.
		tx := sc.TxPipeline()
		tx.Do(ctx, "EVAL", "return redis.call('set','b','1')", "0")
		_, err := tx.Exec(ctx)
		if err == nil || !strings.HasPrefix(err.Error(), keyErr) {
			t.Fatalf("node %d: script in MULTI: %v", id, err)
		}
	}
	if n, err := admin.Exists(ctx, "b").Result(); err != nil || n != 0 {
		t.Fatalf("a refused call wrote b: %d %v", n, err)
	}
}

// TestACLCheckedWhereCurrent: the node does not trust the check of the
// node that received a command: a write of a user with restrictions is
// checked again at apply (with the users of that log index), a read after
// its read point. Backend.Do is called with a user whose rules refuse the
// commands, as a node that had not applied the change yet would send
// them; both are refused and nothing is written.
func TestACLCheckedWhereCurrent(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := testCtx(t, 30*time.Second)
	admin := c.client(1)
	if err := admin.Do(ctx, "ACL", "SETUSER", "u", "on", ">p", "~app:*", "+@all", "-get").Err(); err != nil {
		t.Fatal(err)
	}
	lead := c.waitLeader()
	for id := uint64(1); id <= 3; id++ {
		n := c.node(id)
		u := n.machine.acl.reg.User("u")
		if u == nil {
			t.Fatalf("node %d has no user u", id)
		}
		uctx := resp.WithUser(ctx, u)
		got := (*backend)(n).Do(uctx, [][][]byte{
			{[]byte("SET"), []byte("other"), []byte("x")},
			{[]byte("SET"), []byte("app:1"), []byte("x")},
			{[]byte("GET"), []byte("app:1")},
			{[]byte("EVAL"), []byte("return redis.call('set','other2','x')"), []byte("0")},
			{[]byte("BLPOP"), []byte("other3"), []byte("1")},
			{[]byte("LOCK"), []byte("TRYACQUIRE"), []byte("other4"), []byte("1")},
		})
		want := []string{"NOPERM this user has no permissions to access one of the keys used as arguments", "OK",
			"NOPERM this user has no permissions to run the 'get' command",
			"ERR The user executing the script can't access at least one of the keys mentioned in the command arguments",
			"NOPERM this user has no permissions to access one of the keys used as arguments",
			"NOPERM this user has no permissions to access one of the keys used as arguments"}
		for i, w := range want {
			if g := string(got[i].Str); !strings.HasPrefix(g, w) {
				t.Fatalf("node %d (leader %d), command %d: got %q, want %q", id, lead, i, g, w)
			}
		}
	}
	if n, err := admin.Exists(ctx, "other", "other2").Result(); err != nil || n != 0 {
		t.Fatalf("refused writes wrote: %d %v", n, err)
	}
}

// TestACLSubscriberLosesChannel: a subscriber whose user loses the
// channel it listens to is disconnected (on another node than the one the
// change went through); one whose user keeps it stays.
func TestACLSubscriberLosesChannel(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := testCtx(t, 30*time.Second)
	admin := c.client(1)
	for _, u := range []string{"lose", "keep"} {
		if err := admin.Do(ctx, "ACL", "SETUSER", u, "on", ">p", "~*", "&news.*", "+@all").Err(); err != nil {
			t.Fatal(err)
		}
	}
	subs := map[string]*redis.PubSub{}
	for _, u := range []string{"lose", "keep"} {
		ps := c.userClient(3, u, "p").Subscribe(ctx, "news.today")
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		subs[u] = ps
		defer ps.Close()
	}
	if err := admin.Do(ctx, "ACL", "SETUSER", "lose", "resetchannels", "&sport.*").Err(); err != nil {
		t.Fatal(err)
	}
	// The one that lost the channel is disconnected: its Receive fails
	// (go-redis's PubSub would reconnect, and its SUBSCRIBE is refused).
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := subs["lose"].ReceiveTimeout(rctx, 5*time.Second)
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the subscriber that lost its channel is still connected: %v", err)
	}
	if err := admin.Publish(ctx, "news.today", "hello").Err(); err != nil {
		t.Fatal(err)
	}
	msg, err := subs["keep"].ReceiveMessage(rctx)
	if err != nil || msg.Payload != "hello" {
		t.Fatalf("the subscriber that kept its channel: %v %v", msg, err)
	}
}

// TestCommandInfoCategoriesAreTheACLs: the categories COMMAND INFO gives
// each command are those ACL CAT lists it in, which are those the ACL
// checks enforce (found by TestBadActor: COMMAND INFO said SORT was
// @keyspace, and a user without @keyspace was let run it).
func TestCommandInfoCategoriesAreTheACLs(t *testing.T) {
	c := newTestCluster(t, 1)
	ctx := testCtx(t, 30*time.Second)
	cl := c.client(1)
	cats, err := cl.Do(ctx, "ACL", "CAT").StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	inCat := map[string][]string{}
	for _, cat := range cats {
		names, err := cl.Do(ctx, "ACL", "CAT", cat).StringSlice()
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			inCat[n] = append(inCat[n], "@"+cat)
		}
	}
	infos, err := cl.Do(ctx, "COMMAND", "INFO").Slice()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range infos {
		info := e.([]any)
		name := fmt.Sprint(info[0])
		var got []string
		for _, cat := range info[6].([]any) {
			got = append(got, fmt.Sprint(cat))
		}
		slices.Sort(got)
		want := slices.Clone(inCat[name])
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("COMMAND INFO %s: categories %v, but ACL CAT lists it in %v", name, got, want)
		}
	}
}

// TestACLRestrictedUserBlockingAndLocks: a user with restrictions blocks,
// is served, and takes and releases a lock within its keys (its blocking
// pops and lock commands are proposed for it and checked at apply).
func TestACLRestrictedUserBlockingAndLocks(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := testCtx(t, 30*time.Second)
	if err := c.client(1).Do(ctx, "ACL", "SETUSER", "app", "on", ">p", "~app:*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	cl := c.userClient(2, "app", "p")
	popped := make(chan []string, 1)
	go func() {
		v, err := c.userClient(3, "app", "p").BLPop(ctx, 10*time.Second, "app:l").Result()
		if err != nil {
			t.Error(err)
		}
		popped <- v
	}()
	waitFor(t, 10*time.Second, "the pop blocks", func() bool {
		n, _ := c.client(3).Info(ctx, "clients").Result()
		return strings.Contains(n, "blocked_clients:1")
	})
	if err := cl.RPush(ctx, "app:l", "x").Err(); err != nil {
		t.Fatal(err)
	}
	if v := <-popped; len(v) != 2 || v[1] != "x" {
		t.Fatalf("BLPOP as app: %v", v)
	}
	lease, err := cl.Do(ctx, "LEASE", "GRANT", "10000").Int64()
	if err != nil {
		t.Fatal(err)
	}
	token, err := cl.Do(ctx, "LOCK", "ACQUIRE", "app:lock", lease).Int64()
	if err != nil || token <= 0 {
		t.Fatalf("LOCK ACQUIRE as app: %d %v", token, err)
	}
	if err := cl.Do(ctx, "LOCK", "RELEASE", "app:lock", token).Err(); err != nil {
		t.Fatalf("LOCK RELEASE as app: %v", err)
	}
}
