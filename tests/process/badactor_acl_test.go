package process

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The ACL rows of TestBadActor. The nodes start with --aclfile
// badActorACL: the default user has a password (the fixture's own
// clients authenticate as it), "app" is an application's user limited
// to its keys and channels and without the dangerous and admin
// commands, "keysonly" may run every command but only on app:* keys and
// app.* channels. Users that each lack one category are made through
// the cluster (ACL SETUSER) from the categories the live cluster's
// COMMAND INFO gives its commands, and deleted again.
//
// Every refused command or AUTH must be in the ACL LOG of the node that
// refused it, with Redis's reason, object and username; each row resets
// that log first and then checks it holds exactly the expected entries.

const (
	aclDefaultPass  = "bad-actor-default-password"
	aclAppPass      = "apppw"
	aclKeysOnlyPass = "keysonlypw"
	aclCatPass      = "catpw"
)

var badActorACL = "user default on >" + aclDefaultPass + " ~* &* +@all\n" +
	"user app on >" + aclAppPass + " ~app:* &app.* +@all -@dangerous -@admin\n" +
	"user keysonly on >" + aclKeysOnlyPass + " ~app:* &app.* +@all\n"

const (
	errNoAuth     = "NOAUTH Authentication required."
	errHelloAuth  = "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"
	errWrongPass  = "WRONGPASS invalid username-password pair or user is disabled."
	errNoPermKey  = "NOPERM this user has no permissions to access one of the keys used as arguments"
	errNoPermChan = "NOPERM this user has no permissions to access one of the channels used as arguments"
	errScriptKey  = "ERR The user executing the script can't access at least one of the keys mentioned in the command arguments script: "
)

func errNoPermCmd(name string) string {
	return "NOPERM this user has no permissions to run the '" + name + "' command"
}

// aclUsers is ACL LIST, the same on every node.
func (f *badActor) aclUsers() string {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var first string
	for _, p := range f.procs {
		lines, err := f.redis(p).Do(ctx, "ACL", "LIST").StringSlice()
		if err != nil {
			f.t.Fatalf("node %d: ACL LIST: %v", p.id, err)
		}
		got := strings.Join(lines, "\n")
		if p == f.procs[0] {
			first = got
		} else if got != first {
			f.t.Fatalf("node %d's ACL LIST differs from node 1's:\n%s\n---\n%s", p.id, got, first)
		}
	}
	return first
}

// ---- a raw RESP connection (for what go-redis would not send) ----

type respErr string

type respConn struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

// dialRESP is a TLS connection to p with the fixture's client
// certificate, not authenticated.
func (f *badActor) dialRESP(t *testing.T, p *proc) *respConn {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", p.client, f.client.Clone())
	if err != nil {
		t.Fatalf("node %d: dial: %v", p.id, err)
	}
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	t.Cleanup(func() { c.Close() })
	return &respConn{t: t, c: c, r: bufio.NewReader(c)}
}

func encodeCommand(b []byte, args ...string) []byte {
	b = fmt.Appendf(b, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b
}

func (rc *respConn) send(b []byte) {
	rc.t.Helper()
	if _, err := rc.c.Write(b); err != nil {
		rc.t.Fatalf("write: %v", err)
	}
}

func (rc *respConn) do(args ...string) any {
	rc.t.Helper()
	rc.send(encodeCommand(nil, args...))
	return rc.read()
}

// read reads one reply: string, int64, nil, []any, or respErr.
func (rc *respConn) read() any {
	rc.t.Helper()
	line, err := rc.r.ReadString('\n')
	if err != nil || len(line) < 3 {
		rc.t.Fatalf("reading a reply: %q, %v", line, err)
	}
	typ, body := line[0], strings.TrimSuffix(line[1:], "\r\n")
	n, _ := strconv.Atoi(body)
	switch typ {
	case '+', ',', '#', '(':
		return body
	case '-':
		return respErr(body)
	case ':':
		v, _ := strconv.ParseInt(body, 10, 64)
		return v
	case '_':
		return nil
	case '$', '=':
		if n < 0 {
			return nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rc.r, buf); err != nil {
			rc.t.Fatalf("reading a bulk reply: %v", err)
		}
		return string(buf[:n])
	case '*', '~', '>', '%':
		if n < 0 {
			return nil
		}
		if typ == '%' {
			n *= 2
		}
		out := make([]any, n)
		for i := range out {
			out[i] = rc.read()
		}
		return out
	}
	rc.t.Fatalf("unexpected reply %q", line)
	return nil
}

// wantReply checks that got is the error want.
func wantRespErr(t *testing.T, what string, got any, want string) {
	t.Helper()
	if e, ok := got.(respErr); !ok || string(e) != want {
		t.Fatalf("%s: got %#v, want the error %q", what, got, want)
	}
}

// ---- the ACL LOG ----

// aclLogKey is what identifies an ACL LOG entry (Redis groups equal ones
// and counts them).
type aclLogKey struct{ reason, context, object, username string }

func (k aclLogKey) String() string {
	return fmt.Sprintf("reason=%s context=%s object=%q username=%s", k.reason, k.context, k.object, k.username)
}

func aclLogReset(t *testing.T, p *proc, admin *redis.Client) {
	t.Helper()
	if err := admin.Do(context.Background(), "ACL", "LOG", "RESET").Err(); err != nil {
		t.Fatalf("node %d: ACL LOG RESET: %v", p.id, err)
	}
}

// aclLog is p's ACL LOG: the counts by entry.
func aclLog(t *testing.T, p *proc, admin *redis.Client) map[aclLogKey]int64 {
	t.Helper()
	v, err := admin.Do(context.Background(), "ACL", "LOG", "1000").Slice()
	if err != nil {
		t.Fatalf("node %d: ACL LOG: %v", p.id, err)
	}
	out := map[aclLogKey]int64{}
	for _, e := range v {
		kv, _ := e.([]any)
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[fmt.Sprint(kv[i])] = kv[i+1]
		}
		k := aclLogKey{fmt.Sprint(m["reason"]), fmt.Sprint(m["context"]), fmt.Sprint(m["object"]), fmt.Sprint(m["username"])}
		n, _ := m["count"].(int64)
		out[k] += n
	}
	return out
}

// wantACLLog checks that p's ACL LOG, reset before the attack, holds
// exactly want.
func wantACLLog(t *testing.T, p *proc, admin *redis.Client, want map[aclLogKey]int64) {
	t.Helper()
	got := aclLog(t, p, admin)
	var diff []string
	for k, n := range want {
		if got[k] != n {
			diff = append(diff, fmt.Sprintf("%v: count %d, want %d", k, got[k], n))
		}
	}
	for k, n := range got {
		if _, ok := want[k]; !ok {
			diff = append(diff, fmt.Sprintf("%v: count %d, not expected", k, n))
		}
	}
	if len(diff) > 0 {
		sort.Strings(diff)
		if len(diff) > 10 {
			diff = append(diff[:10], fmt.Sprintf("and %d more", len(diff)-10))
		}
		t.Fatalf("node %d: the ACL LOG is not what the refusals should have logged:\n%s", p.id, strings.Join(diff, "\n"))
	}
}

func top(reason, object, user string) aclLogKey { return aclLogKey{reason, "toplevel", object, user} }

// ---- AUTH and HELLO ----

// attackACLWrongPassword: AUTH with a wrong password for existing users
// (the default user, app), on a fresh connection and on one already
// authenticated as app (which stays app: a failed AUTH changes nothing).
func attackACLWrongPassword(t *testing.T, f *badActor) {
	for _, p := range f.procs {
		admin := f.redis(p)
		aclLogReset(t, p, admin)
		rc := f.dialRESP(t, p)
		wantRespErr(t, "AUTH default <wrong>", rc.do("AUTH", "default", "wrong"), errWrongPass)
		wantRespErr(t, "AUTH app <default's password>", rc.do("AUTH", "app", aclDefaultPass), errWrongPass)
		wantRespErr(t, "AUTH keysonly <app's password>", rc.do("AUTH", "keysonly", aclAppPass), errWrongPass)
		wantRespErr(t, "SET after failed AUTHs", rc.do("SET", "str:1", "hacked"), errNoAuth)

		app := f.dialRESP(t, p)
		if got := app.do("AUTH", "app", aclAppPass); got != "OK" {
			t.Fatalf("node %d: AUTH app: %#v", p.id, got)
		}
		wantRespErr(t, "AUTH default <wrong> as app", app.do("AUTH", "default", "wrong"), errWrongPass)
		if got := app.do("ACL", "WHOAMI"); got != "app" {
			t.Fatalf("node %d: ACL WHOAMI after a failed AUTH: %#v, want app", p.id, got)
		}
		wantRespErr(t, "app SET str:1 after a failed AUTH", app.do("SET", "str:1", "hacked"), errNoPermKey)
		wantACLLog(t, p, admin, map[aclLogKey]int64{
			top("auth", "AUTH", "default"):  2,
			top("auth", "AUTH", "app"):      1,
			top("auth", "AUTH", "keysonly"): 1,
			top("key", "str:1", "app"):      1,
		})
	}
}

func attackACLUnknownUser(t *testing.T, f *badActor) {
	for _, p := range f.procs {
		admin := f.redis(p)
		aclLogReset(t, p, admin)
		rc := f.dialRESP(t, p)
		wantRespErr(t, "AUTH nosuch", rc.do("AUTH", "nosuch", aclAppPass), errWrongPass)
		wantRespErr(t, "AUTH Default (case matters)", rc.do("AUTH", "Default", aclDefaultPass), errWrongPass)
		wantRespErr(t, "AUTH with an empty user", rc.do("AUTH", "", aclDefaultPass), errWrongPass)
		wantRespErr(t, "GET after failed AUTHs", rc.do("GET", "str:1"), errNoAuth)
		wantACLLog(t, p, admin, map[aclLogKey]int64{
			top("auth", "AUTH", "nosuch"):  1,
			top("auth", "AUTH", "Default"): 1,
			top("auth", "AUTH", ""):        1,
		})
	}
}

// attackACLAuthOneArg: AUTH <password> is the default user's: another
// user's password, an empty one and the default one in the wrong case
// are refused.
func attackACLAuthOneArg(t *testing.T, f *badActor) {
	for _, p := range f.procs {
		admin := f.redis(p)
		aclLogReset(t, p, admin)
		rc := f.dialRESP(t, p)
		for _, pw := range []string{aclAppPass, "", strings.ToUpper(aclDefaultPass)} {
			wantRespErr(t, fmt.Sprintf("AUTH %q", pw), rc.do("AUTH", pw), errWrongPass)
		}
		wantRespErr(t, "DEL after failed AUTHs", rc.do("DEL", "str:1"), errNoAuth)
		wantACLLog(t, p, admin, map[aclLogKey]int64{top("auth", "AUTH", "default"): 3})
	}
}

func attackACLHelloAuth(t *testing.T, f *badActor) {
	for _, p := range f.procs {
		admin := f.redis(p)
		aclLogReset(t, p, admin)
		rc := f.dialRESP(t, p)
		wantRespErr(t, "HELLO 3 AUTH default <wrong>", rc.do("HELLO", "3", "AUTH", "default", "wrong"), errWrongPass)
		wantRespErr(t, "HELLO 3 AUTH nosuch", rc.do("HELLO", "3", "AUTH", "nosuch", aclAppPass), errWrongPass)
		wantRespErr(t, "HELLO 2 AUTH app <wrong>", rc.do("HELLO", "2", "AUTH", "app", "wrong"), errWrongPass)
		wantRespErr(t, "HELLO 3 without AUTH", rc.do("HELLO", "3"), errHelloAuth)
		// Still RESP2 and not authenticated.
		wantRespErr(t, "FLUSHALL after failed HELLOs", rc.do("FLUSHALL"), errNoAuth)
		wantACLLog(t, p, admin, map[aclLogKey]int64{
			top("auth", "HELLO", "default"): 1,
			top("auth", "HELLO", "nosuch"):  1,
			top("auth", "HELLO", "app"):     1,
		})
	}
}

// ---- the command table of the live cluster ----

type cmdInfo struct {
	name      string // "get", "config|get"
	arity     int
	flags     []string
	cats      []string // "@read", ...
	group     string   // COMMAND DOCS's group
	container bool
	hasKeys   bool // COMMAND INFO gives it key specs
}

// commandTable is every command and subcommand the cluster lists
// (COMMAND LIST), with COMMAND INFO's arity, flags and categories and
// COMMAND DOCS's group (a subcommand's is its container's).
func commandTable(t *testing.T, admin *redis.Client) []cmdInfo {
	t.Helper()
	ctx := context.Background()
	names, err := admin.Do(ctx, "COMMAND", "LIST").StringSlice()
	if err != nil {
		t.Fatalf("COMMAND LIST: %v", err)
	}
	sort.Strings(names)
	docs, err := admin.Do(ctx, "COMMAND", "DOCS").Slice()
	if err != nil {
		t.Fatalf("COMMAND DOCS: %v", err)
	}
	group, container := map[string]string{}, map[string]bool{}
	for i := 0; i+1 < len(docs); i += 2 {
		name := fmt.Sprint(docs[i])
		kv, _ := docs[i+1].([]any)
		for j := 0; j+1 < len(kv); j += 2 {
			switch fmt.Sprint(kv[j]) {
			case "group":
				group[name] = fmt.Sprint(kv[j+1])
			case "summary":
				container[name] = strings.HasPrefix(fmt.Sprint(kv[j+1]), "A container for")
			}
		}
	}
	args := []any{"COMMAND", "INFO"}
	for _, n := range names {
		args = append(args, n)
	}
	infos, err := admin.Do(ctx, args...).Slice()
	if err != nil || len(infos) != len(names) {
		t.Fatalf("COMMAND INFO: %d replies for %d names, %v", len(infos), len(names), err)
	}
	var out []cmdInfo
	for i, n := range names {
		info, _ := infos[i].([]any)
		if len(info) < 7 {
			// kvorum's COMMAND INFO has no entry for some subcommands
			// COMMAND LIST names: their container is run with HELP.
			continue
		}
		c := cmdInfo{name: n, arity: int(info[1].(int64)), group: group[strings.SplitN(n, "|", 2)[0]],
			container: container[n]}
		for _, f := range info[2].([]any) {
			c.flags = append(c.flags, fmt.Sprint(f))
		}
		for _, cat := range info[6].([]any) {
			c.cats = append(c.cats, fmt.Sprint(cat))
		}
		if len(info) > 8 {
			specs, _ := info[8].([]any)
			for _, spec := range specs {
				kv, _ := spec.([]any)
				for j := 0; j+1 < len(kv); j += 2 {
					if fmt.Sprint(kv[j]) == "flags" && !strings.Contains(fmt.Sprint(kv[j+1]), "not_key") {
						c.hasKeys = true // (SPUBLISH's shard channel is not_key)
					}
				}
			}
		}
		out = append(out, c)
	}
	if len(out) < 150 {
		t.Fatalf("COMMAND LIST/INFO: only %d commands", len(out))
	}
	return out
}

// minimalArgs is name's argument list of the smallest length its arity
// allows, filled with fill.
func minimalArgs(c cmdInfo, fill string) []string {
	n := c.arity
	if n < 0 {
		n = -n
	}
	args := strings.Split(c.name, "|")
	for len(args) < n {
		args = append(args, fill)
	}
	return args
}

// attackACLNoAuth: every command the cluster lists (subcommands as
// themselves, containers without listed subcommands as CONTAINER HELP),
// with as many arguments as its arity asks, on a connection that has not
// authenticated: each gets NOAUTH (after the arity check, as in Redis),
// none is logged (Redis does not log NOAUTH), and the connection can
// still authenticate.
func attackACLNoAuth(t *testing.T, f *badActor) {
	cmds := commandTable(t, f.redis(f.procs[0]))
	hasSubs := map[string]bool{}
	for _, c := range cmds {
		if parent, _, ok := strings.Cut(c.name, "|"); ok {
			hasSubs[parent] = true
		}
	}
	var batch [][]string
	for _, c := range cmds {
		if slices.Contains(c.flags, "no_auth") || slices.Contains([]string{"auth", "hello", "quit", "reset"}, c.name) || hasSubs[c.name] {
			continue
		}
		args := minimalArgs(c, "str:1")
		if c.container && len(args) > 1 {
			args[1] = "help"
		}
		batch = append(batch, args)
	}
	for _, p := range f.procs {
		admin := f.redis(p)
		aclLogReset(t, p, admin)
		rc := f.dialRESP(t, p)
		var b []byte
		for _, args := range batch {
			b = encodeCommand(b, args...)
		}
		rc.send(b)
		for _, args := range batch {
			wantRespErr(t, fmt.Sprintf("node %d: %q before AUTH", p.id, args), rc.read(), errNoAuth)
		}
		if got := rc.do("AUTH", "app", aclAppPass); got != "OK" {
			t.Fatalf("node %d: AUTH app after the refused commands: %#v", p.id, got)
		}
		wantACLLog(t, p, admin, map[aclLogKey]int64{})
	}
	t.Logf("%d commands refused with NOAUTH on each node", len(batch))
}

// ---- key commands, family by family ----

// keyCmd is a command of the live cluster with an argument list whose
// keys (COMMAND GETKEYSANDFLAGS) are all key, an existing key of the
// family's type.
type keyCmd struct {
	cmdInfo
	args []string
	key  string
}

// familyKey is the data set's key a family's commands are aimed at (so
// that a command let through would change it).
func familyKey(group string) string {
	switch group {
	case "hash":
		return "hash:1"
	case "list":
		return "list:1"
	case "set":
		return "set:1"
	case "sorted-set":
		return "zset:1"
	}
	return "str:1"
}

// keyCommands finds, for every command with keys, an argument list of
// its arity whose keys COMMAND GETKEYSANDFLAGS says are all the family's
// key (trying a numkeys argument of 1 in each of the first positions
// when the plain fill has no valid keys). Commands with key specs
// whose arguments cannot be built so, and containers (their subcommands
// are not in kvorum's COMMAND INFO), are returned by name in skipped.
func keyCommands(t *testing.T, admin *redis.Client, cmds []cmdInfo) (out []keyCmd, skipped []string) {
	t.Helper()
	ctx := context.Background()
	for _, c := range cmds {
		if c.container || strings.Contains(c.name, "|") {
			if c.container && c.group != "server" && c.group != "connection" && c.group != "pubsub" {
				skipped = append(skipped, c.name+" (container)")
			}
			continue
		}
		key := familyKey(c.group)
		base := minimalArgs(c, key)
		var cands [][]string
		for _, extra := range []int{0, 1} {
			a := slices.Clone(base)
			for range extra {
				a = append(a, key)
			}
			cands = append(cands, a)
			for pos := 1; pos < len(a) && pos <= 3; pos++ {
				b := slices.Clone(a)
				b[pos] = "1"
				cands = append(cands, b)
			}
		}
		found, hasKeys := false, false
		for _, a := range cands {
			q := []any{"COMMAND", "GETKEYSANDFLAGS"}
			for _, s := range a {
				q = append(q, s)
			}
			v, err := admin.Do(ctx, q...).Slice()
			if err != nil {
				if strings.Contains(err.Error(), "no key arguments") {
					break
				}
				continue
			}
			ok, anyKey := true, false
			for _, e := range v {
				kf, _ := e.([]any)
				if len(kf) != 2 {
					ok = false
					break
				}
				flags := fmt.Sprint(kf[1])
				if strings.Contains(flags, "not_key") {
					continue
				}
				anyKey = true
				ok = ok && fmt.Sprint(kf[0]) == key
			}
			hasKeys = hasKeys || anyKey
			if ok && anyKey {
				out = append(out, keyCmd{cmdInfo: c, args: a, key: key})
				found = true
				break
			}
		}
		if !found && (hasKeys || c.hasKeys) {
			skipped = append(skipped, c.name)
		}
	}
	return out, skipped
}

// keyFamilies is the key commands by family (COMMAND DOCS group), in
// order, with the commands whose arguments could not be built.
func (f *badActor) keyFamilies(t *testing.T) (map[string][]keyCmd, []string, []string) {
	t.Helper()
	admin := f.redis(f.procs[0])
	kcs, skipped := keyCommands(t, admin, commandTable(t, admin))
	fams := map[string][]keyCmd{}
	for _, kc := range kcs {
		fams[kc.group] = append(fams[kc.group], kc)
	}
	var names []string
	for g := range fams {
		names = append(names, g)
	}
	sort.Strings(names)
	if len(names) < 8 || len(kcs) < 100 {
		t.Fatalf("only %d key commands in %d families: %v", len(kcs), len(names), names)
	}
	return fams, names, skipped
}

// runRefused sends every command of kcs through cl in one pipeline and
// checks that each is refused with want(kc).
func runRefused(t *testing.T, p *proc, cl *redis.Client, kcs []keyCmd, want func(keyCmd) string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pipe := cl.Pipeline()
	cmds := make([]*redis.Cmd, len(kcs))
	for i, kc := range kcs {
		a := make([]any, len(kc.args))
		for j, s := range kc.args {
			a[j] = s
		}
		cmds[i] = pipe.Do(ctx, a...)
	}
	_, _ = pipe.Exec(ctx)
	for i, kc := range kcs {
		if err := cmds[i].Err(); err == nil || err.Error() != want(kc) {
			t.Errorf("node %d: %q: got %v, want %q", p.id, kc.args, err, want(kc))
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// attackACLCategories: for each family of the live cluster's commands
// (COMMAND DOCS group) and each category of each of its key commands
// (COMMAND INFO), a user allowed everything but that category runs the
// command on the family's key: NOPERM for the command, logged with the
// command as object. The users are made through node 1 (ACL SETUSER,
// replicated) and each family is tried on another node.
func attackACLCategories(t *testing.T, f *badActor) {
	fams, names, skipped := f.keyFamilies(t)
	ctx := context.Background()
	admin1 := f.redis(f.procs[0])
	cats := map[string]bool{}
	for _, kcs := range fams {
		for _, kc := range kcs {
			for _, c := range kc.cats {
				cats[c] = true
			}
		}
	}
	var users []any
	for c := range cats {
		u := "lacks-" + strings.TrimPrefix(c, "@")
		if err := admin1.Do(ctx, "ACL", "SETUSER", u, "on", ">"+aclCatPass, "~*", "&*", "+@all", "-"+c).Err(); err != nil {
			t.Fatalf("ACL SETUSER %s: %v", u, err)
		}
		users = append(users, u)
	}
	defer func() {
		if err := admin1.Do(ctx, append([]any{"ACL", "DELUSER"}, users...)...).Err(); err != nil {
			t.Errorf("ACL DELUSER: %v", err)
		}
	}()
	n := 0
	for i, g := range names {
		p := f.procs[i%len(f.procs)]
		admin := f.redis(p)
		byCat := map[string][]keyCmd{}
		for _, kc := range fams[g] {
			for _, c := range kc.cats {
				byCat[c] = append(byCat[c], kc)
			}
		}
		for c, kcs := range byCat {
			u := "lacks-" + strings.TrimPrefix(c, "@")
			aclLogReset(t, p, admin)
			cl := f.userRedis(p, u, aclCatPass)
			runRefused(t, p, cl, kcs, func(kc keyCmd) string { return errNoPermCmd(kc.name) })
			want := map[aclLogKey]int64{}
			for _, kc := range kcs {
				want[top("command", kc.name, u)]++
			}
			wantACLLog(t, p, admin, want)
			cl.Close()
			n += len(kcs)
		}
	}
	t.Logf("%d refusals of %d families' key commands for %d users lacking a category; families %v; not built generically: %v",
		n, len(names), len(users), names, skipped)
}

// attackACLKeyPattern: every family's key commands for keysonly (every
// command, keys app:* only) on the family's key: NOPERM for the key,
// logged with the key as object.
func attackACLKeyPattern(t *testing.T, f *badActor) {
	fams, names, _ := f.keyFamilies(t)
	n := 0
	for i, g := range names {
		p := f.procs[i%len(f.procs)]
		admin := f.redis(p)
		aclLogReset(t, p, admin)
		cl := f.userRedis(p, "keysonly", aclKeysOnlyPass)
		kcs := fams[g]
		runRefused(t, p, cl, kcs, func(keyCmd) string { return errNoPermKey })
		want := map[aclLogKey]int64{}
		for _, kc := range kcs {
			want[top("key", kc.key, "keysonly")]++
		}
		wantACLLog(t, p, admin, want)
		n += len(kcs)
	}
	t.Logf("%d key commands of %d families refused for keysonly", n, len(names))
}

// ---- scripts, pub/sub, locks ----

// attackACLScripts: app's scripts that call commands on keys outside
// app:* (EVAL with and without declared keys, redis.pcall, EVAL_RO,
// EVALSHA, FCALL, FCALL_RO, a script queued in MULTI) get Redis's script
// error on every node and write nothing. A script on app's own key
// works (and is undone).
//
// kvorum runs scripts when it applies them, on every node, and does not
// add these refusals to the ACL LOG (Redis logs them with context lua):
// the log is checked to hold nothing else.
func attackACLScripts(t *testing.T, f *badActor) {
	ctx := context.Background()
	admin1 := f.redis(f.procs[0])
	lib := "#!lua name=badactor\n" +
		"redis.register_function('hack', function(keys, args) return redis.call('set', 'str:1', 'hacked') end)\n" +
		"redis.register_function{function_name='peek', callback=function(keys, args) return redis.call('get', 'str:2') end, flags={'no-writes'}}"
	if err := admin1.Do(ctx, "FUNCTION", "LOAD", lib).Err(); err != nil {
		t.Fatalf("FUNCTION LOAD: %v", err)
	}
	defer func() {
		if err := admin1.Do(ctx, "FUNCTION", "DELETE", "badactor").Err(); err != nil {
			t.Errorf("FUNCTION DELETE: %v", err)
		}
	}()
	sha, err := admin1.Do(ctx, "SCRIPT", "LOAD", "return redis.call('del', 'str:3')").Text()
	if err != nil {
		t.Fatalf("SCRIPT LOAD: %v", err)
	}
	for _, p := range f.procs {
		admin := f.redis(p)
		aclLogReset(t, p, admin)
		app := f.userRedis(p, "app", aclAppPass)
		for _, tc := range []struct {
			args []any
			want string
		}{
			{[]any{"EVAL", "return redis.call('set', 'str:1', 'hacked')", "0"}, errScriptKey},
			{[]any{"EVAL", "return redis.call('del', 'hash:1')", "1", "app:k"}, errScriptKey},
			{[]any{"EVAL", "return redis.call('set', KEYS[1], 'x', 'GET')", "1", "app:k"}, ""},
			{[]any{"EVAL", "return redis.pcall('lpush', 'list:1', 'x')", "0"}, strings.TrimSuffix(errScriptKey, " script: ")},
			{[]any{"EVAL_RO", "return redis.call('get', 'str:2')", "0"}, errScriptKey},
			{[]any{"EVALSHA", sha, "0"}, errScriptKey},
			{[]any{"FCALL", "hack", "0"}, errScriptKey},
			{[]any{"FCALL", "hack", "1", "app:k"}, errScriptKey},
			{[]any{"FCALL_RO", "peek", "0"}, errScriptKey},
		} {
			err := app.Do(ctx, tc.args...).Err()
			switch {
			case tc.want == "" && err != nil && err != redis.Nil:
				t.Fatalf("node %d: app's own script %q: %v", p.id, tc.args, err)
			case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
				t.Fatalf("node %d: %q: got %v, want %q...", p.id, tc.args, err, tc.want)
			}
		}
		if err := app.Do(ctx, "EVAL", "return redis.call('del', KEYS[1])", "1", "app:k").Err(); err != nil {
			t.Fatalf("node %d: app deleting its own key: %v", p.id, err)
		}
		tx := app.TxPipeline()
		ev := tx.Do(ctx, "EVAL", "return redis.call('zadd', 'zset:1', 100, 'hacked')", "0")
		_, _ = tx.Exec(ctx)
		if err := ev.Err(); err == nil || !strings.HasPrefix(err.Error(), errScriptKey) {
			t.Fatalf("node %d: a script in MULTI/EXEC: %v, want %q...", p.id, err, errScriptKey)
		}
		wantACLLog(t, p, admin, map[aclLogKey]int64{})
	}
}

// attackACLPubSub: app publishes and subscribes outside &app.*: NOPERM
// for the channel, logged; a subscriber of that channel (the default
// user) receives nothing but a message published after the refusals,
// while app's publish to app.news.<node> reaches its subscriber.
func attackACLPubSub(t *testing.T, f *badActor) {
	for _, p := range f.procs {
		// A message is delivered on every node: each node's channels are
		// its own, so that an earlier node's messages are not read here.
		news, appNews := fmt.Sprintf("news.%d", p.id), fmt.Sprintf("app.news.%d", p.id)
		admin := f.redis(p)
		aclLogReset(t, p, admin)
		sub := f.dialRESP(t, p)
		if got := sub.do("AUTH", "default", aclDefaultPass); got != "OK" {
			t.Fatalf("node %d: AUTH: %#v", p.id, got)
		}
		for _, ch := range []string{news, appNews} {
			if got, ok := sub.do("SUBSCRIBE", ch).([]any); !ok || len(got) != 3 || got[1] != ch {
				t.Fatalf("node %d: SUBSCRIBE %s: %#v", p.id, ch, got)
			}
		}
		app := f.dialRESP(t, p)
		if got := app.do("AUTH", "app", aclAppPass); got != "OK" {
			t.Fatalf("node %d: AUTH app: %#v", p.id, got)
		}
		wantRespErr(t, "PUBLISH news", app.do("PUBLISH", news, "forged"), errNoPermChan)
		wantRespErr(t, "SPUBLISH news", app.do("SPUBLISH", news, "forged"), errNoPermChan)
		if got := app.do("PUBLISH", appNews, "fine"); got != int64(1) {
			t.Fatalf("node %d: app PUBLISH %s: %#v, want 1 receiver", p.id, appNews, got)
		}
		wantRespErr(t, "SUBSCRIBE news", app.do("SUBSCRIBE", appNews, news), errNoPermChan)
		wantRespErr(t, "PSUBSCRIBE *", app.do("PSUBSCRIBE", "*"), errNoPermChan)
		wantRespErr(t, "SSUBSCRIBE news", app.do("SSUBSCRIBE", news), errNoPermChan)
		// app is subscribed to nothing: it still runs ordinary commands.
		if got := app.do("PING"); got != "PONG" {
			t.Fatalf("node %d: app PING after refused subscriptions: %#v", p.id, got)
		}
		if err := admin.Publish(context.Background(), news, "marker").Err(); err != nil {
			t.Fatal(err)
		}
		var got []string
		for range 2 {
			m, _ := sub.read().([]any)
			got = append(got, fmt.Sprint(m...))
		}
		if want := []string{"message" + appNews + "fine", "message" + news + "marker"}; !slices.Equal(got, want) {
			t.Fatalf("node %d: the subscriber got %q, want %q", p.id, got, want)
		}
		wantACLLog(t, p, admin, map[aclLogKey]int64{
			top("channel", news, "app"): 4,
			top("channel", "*", "app"):  1,
		})
	}
}

// attackACLLock: app's LOCK ACQUIRE and TRYACQUIRE on lock names outside
// app:* (a lock name is a key), and a LOCK FENCED under app's own lock
// whose command writes outside app:*: key NOPERM, logged, no lock
// taken; the lease and lock app held are given back.
func attackACLLock(t *testing.T, f *badActor) {
	ctx := context.Background()
	for _, p := range f.procs {
		admin := f.redis(p)
		aclLogReset(t, p, admin)
		app := f.userRedis(p, "app", aclAppPass)
		lease, err := app.Do(ctx, "LEASE", "GRANT", "30000").Int64()
		if err != nil {
			t.Fatalf("node %d: app LEASE GRANT: %v", p.id, err)
		}
		ls := strconv.FormatInt(lease, 10)
		for _, args := range [][]any{
			{"LOCK", "ACQUIRE", "locks:orders", ls, "TIMEOUT", "1000"},
			{"LOCK", "ACQUIRE", "str:1", ls},
			{"LOCK", "TRYACQUIRE", "locks:orders", ls, "SHARED"},
		} {
			if err := app.Do(ctx, args...).Err(); err == nil || err.Error() != errNoPermKey {
				t.Fatalf("node %d: %q: %v, want %q", p.id, args, err, errNoPermKey)
			}
		}
		tok, err := app.Do(ctx, "LOCK", "TRYACQUIRE", "app:lock", ls).Int64()
		if err != nil {
			t.Fatalf("node %d: app LOCK TRYACQUIRE app:lock: %v", p.id, err)
		}
		if err := app.Do(ctx, "LOCK", "FENCED", "app:lock", tok, "SET", "str:1", "hacked").Err(); err == nil || err.Error() != errNoPermKey {
			t.Fatalf("node %d: LOCK FENCED app:lock SET str:1: %v, want %q", p.id, err, errNoPermKey)
		}
		if err := app.Do(ctx, "LOCK", "RELEASE", "app:lock", tok).Err(); err != nil {
			t.Fatalf("node %d: LOCK RELEASE: %v", p.id, err)
		}
		if err := app.Do(ctx, "LEASE", "REVOKE", ls).Err(); err != nil {
			t.Fatalf("node %d: LEASE REVOKE: %v", p.id, err)
		}
		for _, name := range []string{"locks:orders", "str:1"} {
			info, err := admin.Do(ctx, "LOCK", "INFO", name).Slice()
			if err != nil || len(info) < 2 || info[0] != "mode" || info[1] != "free" {
				t.Fatalf("node %d: LOCK INFO %s after the refusals: %#v %v, want mode free", p.id, name, info, err)
			}
		}
		wantACLLog(t, p, admin, map[aclLogKey]int64{
			top("key", "locks:orders", "app"): 2,
			top("key", "str:1", "app"):        2,
		})
	}
}
