package process

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	be "encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvorum/kvorum/internal/devca"
)

// The bad-input and bad-actor suite of issue 16: three `kvorum start`
// processes with every protection kvorum has switched on (client TLS
// that requires a certificate of the cluster's CA, with the plain-text
// port off; peer mutual TLS; an admin token over HTTPS), a known data set
// written through a proper client, then one attack after another. Each
// must be refused with the right error, be counted (a /metrics counter)
// and logged (the node's stderr, run at debug level) where kvorum does so,
// and change nothing: at the end every node's data and the membership are
// compared with what they were before the attacks.
//
// An attack is a named func of badActorAttacks sharing the fixture. The
// nodes also start with --aclfile (badactor_acl_test.go: the default
// user has a password, which the fixture's clients use, and restricted
// users); the ACL rows there attack AUTH, HELLO and every command before
// AUTH, and run every family's key commands, scripts, pub/sub and locks
// as users without the category, key or channel, checking each NOPERM
// and its ACL LOG entry. At the end the users are compared too.

// badActor is the fixture: the cluster and what a legitimate client or
// operator holds (the CA, a client certificate, the admin token), plus an
// impostor CA.
type badActor struct {
	*cluster
	dir     string
	ca      *devca.CA // the cluster's CA: node certificates, client certificates
	otherCA *devca.CA // an impostor's CA
	token   string    // the admin token
	client  *tls.Config
	https   *http.Client // trusts ca; sends no token by itself
	logOff  map[int]int64
}

// badActorAttack runs one attack against the fixture and checks its
// refusal (the caller compares the data afterwards).
type badActorAttack struct {
	name string
	run  func(t *testing.T, f *badActor)
}

var badActorAttacks = []badActorAttack{
	{"plaintext RESP on the TLS port", attackPlaintextRESP},
	{"TLS client without a certificate", attackTLSNoCert},
	{"TLS client with a certificate of another CA", attackTLSOtherCA},
	{"TLS client with an expired certificate", attackTLSExpired},
	{"TLS client with a server certificate of the cluster's CA", attackTLSServerCert},
	{"TLS 1.1 client", attackTLSOldVersion},
	{"peer without a certificate joins", attackPeerJoinPlaintext},
	{"peer with a certificate of another CA joins", attackPeerJoinOtherCA},
	{"peer without TLS injects a Raft message", attackRaftInjectPlaintext},
	{"peer with TLS but no certificate injects a Raft message", attackRaftInjectNoCert},
	{"peer with a certificate of another CA injects a Raft message", attackRaftInjectOtherCA},
	{"admin API without or with a wrong token", attackAdminToken},
	{"admin API in plain HTTP on the HTTPS port", attackAdminPlainHTTP},
	{"malformed and oversized RESP frames", attackMalformedRESP},
	{"ACL: AUTH with a wrong password", attackACLWrongPassword},
	{"ACL: AUTH as an unknown user", attackACLUnknownUser},
	{"ACL: AUTH with only a password", attackACLAuthOneArg},
	{"ACL: every command before AUTH", attackACLNoAuth},
	{"ACL: HELLO 3 AUTH with a wrong password", attackACLHelloAuth},
	{"ACL: every family's key commands for users without one of their categories", attackACLCategories},
	{"ACL: every family's key commands for a user without the key pattern", attackACLKeyPattern},
	{"ACL: scripts reaching outside the user's keys", attackACLScripts},
	{"ACL: PUBLISH and SUBSCRIBE outside the user's channels", attackACLPubSub},
	{"ACL: LOCK outside the user's keys", attackACLLock},
}

func TestBadActor(t *testing.T) {
	start := time.Now()
	f := newBadActor(t)
	f.waitReady()
	want := f.writeDataSet()
	before := map[int]map[string]string{}
	for _, p := range f.procs {
		before[p.id] = f.waitDump(p, want)
	}
	members := f.members()
	users := f.aclUsers()
	t.Logf("cluster up and %d keys written and read back on every node in %v", len(want), time.Since(start).Round(time.Millisecond))

	for _, a := range badActorAttacks {
		t.Run(a.name, func(t *testing.T) {
			at := time.Now()
			a.run(t, f)
			f.alive(t)
			t.Logf("%v", time.Since(at).Round(time.Millisecond))
		})
	}

	// Nothing changed: every node's data, and the membership.
	for _, p := range f.procs {
		if diff := dumpDiff(before[p.id], f.dump(p)); diff != "" {
			t.Errorf("node %d: the data changed during the attacks: %s", p.id, diff)
		}
	}
	if got := f.members(); got != members {
		t.Errorf("the membership changed during the attacks:\nbefore %s\nafter  %s", members, got)
	}
	if got := f.aclUsers(); got != users {
		t.Errorf("the ACL users changed during the attacks:\nbefore %s\nafter  %s", users, got)
	}
	f.stillReplicates(t)
	if t.Failed() {
		f.dumpLogs()
	}
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}

func newBadActor(t *testing.T) *badActor {
	t.Helper()
	f := &badActor{cluster: &cluster{t: t}, dir: t.TempDir(), logOff: map[int]int64{}}
	var err error
	if f.ca, err = devca.New("kvorum bad-actor cluster CA"); err != nil {
		t.Fatal(err)
	}
	if f.otherCA, err = devca.New("kvorum bad-actor impostor CA"); err != nil {
		t.Fatal(err)
	}
	var tok [16]byte
	_, _ = rand.Read(tok[:])
	f.token = hex.EncodeToString(tok[:])
	aclFile := filepath.Join(f.dir, "users.acl")
	if err := os.WriteFile(aclFile, []byte(badActorACL), 0o600); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(f.dir, "admin.token")
	if err := os.WriteFile(tokenFile, []byte(f.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.client = &tls.Config{RootCAs: f.ca.Pool(), Certificates: []tls.Certificate{certPair(t)(f.ca.Client("bad-actor test client"))}}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: f.ca.Pool()}
	f.https = &http.Client{Transport: tr, Timeout: 5 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)

	var initial []string
	for i := 1; i <= 3; i++ {
		host := fmt.Sprintf("127.0.0.%d", i)
		// client is the TLS client port (--port 0: no plain-text port).
		p := &proc{id: i, host: host, dataDir: filepath.Join(f.dir, fmt.Sprintf("node-%d", i)),
			client: freePort(t, host), peer: freePort(t, host), admin: freePort(t, host)}
		f.procs = append(f.procs, p)
		initial = append(initial, fmt.Sprintf("%d=%s", i, p.peer))
	}
	t.Cleanup(func() {
		for _, p := range f.procs {
			f.kill(p, syscall.SIGKILL)
		}
	})
	for _, p := range f.procs {
		cert, err := f.ca.Issue(fmt.Sprintf("node-%d", p.id), p.host)
		if err != nil {
			t.Fatal(err)
		}
		files, err := f.ca.WriteFiles(filepath.Join(f.dir, "tls"), fmt.Sprintf("node-%d", p.id), cert)
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(p.client)
		f.start(p, "--initial-cluster", strings.Join(initial, ","),
			"--port", "0", "--tls-port", port, "--tls-cert-file", files.Cert, "--tls-key-file", files.Key,
			"--tls-ca-cert-file", files.CA, "--tls-auth-clients", "yes",
			"--peer-cert-file", files.Cert, "--peer-key-file", files.Key, "--peer-trusted-ca-file", files.CA,
			"--aclfile", aclFile, "--admin-token-file", tokenFile, "--admin-tls-cert-file", files.Cert, "--admin-tls-key-file", files.Key,
			"--pprof", "--log-level", "debug")
	}
	return f
}

// certPair(t)(ca.Client(...)) is the certificate devca issued as a
// tls.Certificate, failing t if it could not.
func certPair(t *testing.T) func(c *devca.Issued, err error) tls.Certificate {
	return func(c *devca.Issued, err error) tls.Certificate {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		pair, err := c.TLS()
		if err != nil {
			t.Fatal(err)
		}
		return pair
	}
}

// redis is a go-redis client of p with the fixture's client certificate,
// authenticated as the default user (who may do anything); it never
// resends a command.
func (f *badActor) redis(p *proc) *redis.Client {
	return f.userRedis(p, "default", aclDefaultPass)
}

// userRedis is a go-redis client of p with the fixture's client
// certificate, authenticated as user (RESP2: AUTH user password).
func (f *badActor) userRedis(p *proc, user, password string) *redis.Client {
	cl := redis.NewClient(&redis.Options{Addr: p.client, TLSConfig: f.client.Clone(), Protocol: 2, MaxRetries: -1,
		Username: user, Password: password,
		DialTimeout: 2 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 5 * time.Second})
	f.t.Cleanup(func() { cl.Close() })
	return cl
}

// admin sends an admin request to p with the given Authorization header
// ("" for none) and returns the status code and body.
func (f *badActor) admin(p *proc, method, path, auth, body string) (int, http.Header, string, error) {
	return f.adminVia(f.https, p, method, path, auth, body)
}

func (f *badActor) adminVia(hc *http.Client, p *proc, method, path, auth, body string) (int, http.Header, string, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "https://"+p.admin+path, rd)
	if err != nil {
		return 0, nil, "", err
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header, string(b), err
}

func (f *badActor) bearer() string { return "Bearer " + f.token }

// waitReady waits until every node is ready and names the same leader
// (through the admin API, with the token).
func (f *badActor) waitReady() {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var lead uint64
		ok := true
		for _, p := range f.procs {
			code, _, body, err := f.admin(p, http.MethodGet, "/v1/status", f.bearer(), "")
			var st status
			if err == nil && code == http.StatusOK {
				err = json.Unmarshal([]byte(body), &st)
			}
			if err != nil || code != http.StatusOK || !st.Ready || st.Leader == 0 || (lead != 0 && st.Leader != lead) {
				ok = false
				break
			}
			lead = st.Leader
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			f.dumpLogs()
			f.t.Fatal("the cluster did not agree on a ready leader within 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// members is the membership as node 1 reports it (GET /v1/members).
func (f *badActor) members() string {
	f.t.Helper()
	code, _, body, err := f.admin(f.procs[0], http.MethodGet, "/v1/members", f.bearer(), "")
	if err != nil || code != http.StatusOK {
		f.t.Fatalf("GET /v1/members with the token: %d %v %s", code, err, body)
	}
	var v struct {
		Members []struct {
			ID       uint64 `json:"id"`
			PeerAddr string `json:"peer_addr"`
			Learner  bool   `json:"learner"`
		} `json:"members"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		f.t.Fatalf("GET /v1/members: %v: %s", err, body)
	}
	sort.Slice(v.Members, func(i, j int) bool { return v.Members[i].ID < v.Members[j].ID })
	b, _ := json.Marshal(v.Members)
	return string(b)
}

// metric is the sum of the samples of the counter name on p whose labels
// contain labels (all samples when labels is "").
func (f *badActor) metric(p *proc, name, labels string) (float64, error) {
	code, _, body, err := f.admin(p, http.MethodGet, "/metrics", f.bearer(), "")
	if err != nil {
		return 0, err
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: %d %s", code, body)
	}
	var sum float64
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		lbl := ""
		if rest[0] == '{' {
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				continue
			}
			lbl, rest = rest[1:end], rest[end+1:]
		}
		if !strings.Contains(lbl, labels) {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("metric %s: %q: %v", name, line, err)
		}
		sum += v
	}
	return sum, nil
}

// counter reads a counter, failing the test if /metrics cannot be read.
func (f *badActor) counter(t *testing.T, p *proc, name, labels string) float64 {
	t.Helper()
	v, err := f.metric(p, name, labels)
	if err != nil {
		t.Fatalf("node %d: %v", p.id, err)
	}
	return v
}

// waitCounter polls until the counter on p has reached want (the node
// counts a refusal after the attacker has seen it); more is an error
// too, unless atLeast.
func (f *badActor) waitCounter(t *testing.T, p *proc, name, labels string, want float64, atLeast ...bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, err := f.metric(p, name, labels)
		if err == nil && v >= want {
			if v > want && len(atLeast) == 0 {
				t.Errorf("node %d: %s{%s} = %v, want %v (more refusals than attacks)", p.id, name, labels, v, want)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d: %s{%s} = %v (%v), want %v", p.id, name, labels, v, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// markLog notes where p's log ends, for waitLog.
func (f *badActor) markLog(t *testing.T, p *proc) {
	t.Helper()
	st, err := os.Stat(p.dataDir + ".log")
	if err != nil {
		t.Fatal(err)
	}
	f.logOff[p.id] = st.Size()
}

// waitLog polls until p's log has a line holding every one of parts since
// markLog.
func (f *badActor) waitLog(t *testing.T, p *proc, parts ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(p.dataDir + ".log")
		if err != nil {
			t.Fatal(err)
		}
		if off := f.logOff[p.id]; off <= int64(len(b)) {
			b = b[off:]
		}
		for _, line := range strings.Split(string(b), "\n") {
			all := true
			for _, s := range parts {
				all = all && strings.Contains(line, s)
			}
			if all {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d logged no line with %q", p.id, parts)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// alive checks that every node still answers, and that no node logged a
// panic.
func (f *badActor) alive(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, p := range f.procs {
		if err := f.redis(p).Ping(ctx).Err(); err != nil {
			t.Fatalf("node %d does not answer PING after the attack: %v", p.id, err)
		}
		if b, _ := os.ReadFile(p.dataDir + ".log"); strings.Contains(string(b), "panic") {
			t.Fatalf("node %d logged a panic", p.id)
		}
	}
}

// stillReplicates writes a key (after the comparison) through each node
// and reads every one back on every node.
func (f *badActor) stillReplicates(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, p := range f.procs {
		if err := f.redis(p).Set(ctx, fmt.Sprintf("after-attacks-%d", p.id), "ok", 0).Err(); err != nil {
			t.Fatalf("node %d: a write after the attacks: %v", p.id, err)
		}
	}
	for _, p := range f.procs {
		for _, q := range f.procs {
			for {
				v, err := f.redis(p).Get(ctx, fmt.Sprintf("after-attacks-%d", q.id)).Result()
				if err == nil && v == "ok" {
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("node %d: the write through node %d after the attacks: %q, %v", p.id, q.id, v, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
}

// The data set: 40 keys of each of five types, one string holding RESP
// of its own.
const badActorKeysPerType = 40

func (f *badActor) writeDataSet() map[string]string {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	want := map[string]string{}
	pipe := f.redis(f.procs[0]).Pipeline()
	for i := 0; i < badActorKeysPerType; i++ {
		v := fmt.Sprintf("value-%d", i)
		if i == 0 {
			v = "*1\r\n$8\r\nFLUSHALL\r\n\x00\xff"
		}
		pipe.Set(ctx, fmt.Sprintf("str:%d", i), v, 0)
		want[fmt.Sprintf("str:%d", i)] = "string " + strconv.Quote(v)

		var fields, members, list, zs []string
		var zms []redis.Z
		for j := 0; j < 5; j++ {
			fv := fmt.Sprintf("f%d", j)
			fields = append(fields, fv+"="+fmt.Sprintf("%d-%d", i, j))
			pipe.HSet(ctx, fmt.Sprintf("hash:%d", i), fv, fmt.Sprintf("%d-%d", i, j))
			list = append(list, fmt.Sprintf("e%d", (j*7+i)%5))
			members = append(members, fmt.Sprintf("m%d-%d", i, j))
			zms = append(zms, redis.Z{Score: float64(j*i) / 4, Member: fmt.Sprintf("z%d", j)})
		}
		pipe.RPush(ctx, fmt.Sprintf("list:%d", i), toAny(list)...)
		pipe.SAdd(ctx, fmt.Sprintf("set:%d", i), toAny(members)...)
		pipe.ZAdd(ctx, fmt.Sprintf("zset:%d", i), zms...)
		sort.Slice(zms, func(a, b int) bool {
			if zms[a].Score != zms[b].Score {
				return zms[a].Score < zms[b].Score
			}
			return zms[a].Member.(string) < zms[b].Member.(string)
		})
		for _, z := range zms {
			zs = append(zs, fmt.Sprintf("%s=%s", z.Member, strconv.FormatFloat(z.Score, 'g', -1, 64)))
		}
		sort.Strings(fields)
		sort.Strings(members)
		want[fmt.Sprintf("hash:%d", i)] = "hash " + strings.Join(fields, ",")
		want[fmt.Sprintf("list:%d", i)] = "list " + strings.Join(list, ",")
		want[fmt.Sprintf("set:%d", i)] = "set " + strings.Join(members, ",")
		want[fmt.Sprintf("zset:%d", i)] = "zset " + strings.Join(zs, ",")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		f.dumpLogs()
		f.t.Fatalf("writing the data set: %v", err)
	}
	return want
}

func toAny(s []string) []any {
	a := make([]any, len(s))
	for i := range s {
		a[i] = s[i]
	}
	return a
}

// dump reads every key of p (SCAN) by type, in a canonical form: "type
// contents" (sorted where the type has no order), with the TTL when the
// key has one.
func (f *badActor) dump(p *proc) map[string]string {
	f.t.Helper()
	d, err := f.tryDump(p)
	if err != nil {
		f.t.Fatalf("node %d: dump: %v", p.id, err)
	}
	return d
}

func (f *badActor) tryDump(p *proc) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := f.redis(p)
	var keys []string
	cursor := uint64(0)
	for i := 0; ; i++ {
		ks, next, err := cl.Scan(ctx, cursor, "*", 1000).Result()
		if err != nil {
			return nil, err
		}
		keys = append(keys, ks...)
		if cursor = next; cursor == 0 {
			break
		}
		if i > 10000 {
			return nil, fmt.Errorf("SCAN does not end")
		}
	}
	pipe := cl.Pipeline()
	types := make([]*redis.StatusCmd, len(keys))
	ttls := make([]*redis.DurationCmd, len(keys))
	for i, k := range keys {
		types[i] = pipe.Type(ctx, k)
		ttls[i] = pipe.PTTL(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	pipe = cl.Pipeline()
	reads := make([]redis.Cmder, len(keys))
	for i, k := range keys {
		switch types[i].Val() {
		case "string":
			reads[i] = pipe.Get(ctx, k)
		case "hash":
			reads[i] = pipe.HGetAll(ctx, k)
		case "list":
			reads[i] = pipe.LRange(ctx, k, 0, -1)
		case "set":
			reads[i] = pipe.SMembers(ctx, k)
		case "zset":
			reads[i] = pipe.ZRangeWithScores(ctx, k, 0, -1)
		default:
			return nil, fmt.Errorf("key %q of unexpected type %q", k, types[i].Val())
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	d := make(map[string]string, len(keys))
	for i, k := range keys {
		var s string
		switch r := reads[i].(type) {
		case *redis.StringCmd:
			s = "string " + strconv.Quote(r.Val())
		case *redis.MapStringStringCmd:
			var fs []string
			for fk, fv := range r.Val() {
				fs = append(fs, fk+"="+fv)
			}
			sort.Strings(fs)
			s = "hash " + strings.Join(fs, ",")
		case *redis.StringSliceCmd:
			v := r.Val()
			if types[i].Val() == "set" {
				sort.Strings(v)
			}
			s = types[i].Val() + " " + strings.Join(v, ",")
		case *redis.ZSliceCmd:
			var zs []string
			for _, z := range r.Val() {
				zs = append(zs, fmt.Sprintf("%v=%s", z.Member, strconv.FormatFloat(z.Score, 'g', -1, 64)))
			}
			s = "zset " + strings.Join(zs, ",")
		}
		if ttls[i].Val() >= 0 {
			s += " with a TTL"
		}
		d[k] = s
	}
	return d, nil
}

// waitDump polls until p's dump is want (a follower may apply the last
// writes a little after the leader acknowledged them) and returns it.
func (f *badActor) waitDump(p *proc, want map[string]string) map[string]string {
	f.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		d, err := f.tryDump(p)
		if err == nil && dumpDiff(want, d) == "" {
			return d
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("%s", dumpDiff(want, d))
			}
			f.dumpLogs()
			f.t.Fatalf("node %d does not hold the data set written: %v", p.id, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// dumpDiff describes how got differs from want ("" if it does not).
func dumpDiff(want, got map[string]string) string {
	var d []string
	for k, v := range want {
		if g, ok := got[k]; !ok {
			d = append(d, fmt.Sprintf("%q missing", k))
		} else if g != v {
			d = append(d, fmt.Sprintf("%q = %s, want %s", k, g, v))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			d = append(d, fmt.Sprintf("%q = %s appeared", k, v))
		}
	}
	sort.Strings(d)
	if len(d) > 5 {
		d = append(d[:5], fmt.Sprintf("and %d more", len(d)-5))
	}
	return strings.Join(d, "; ")
}

// ---- client port attacks ----

const (
	mTLSFails   = "kvorum_resp_tls_handshake_failures_total"
	mProtoErrs  = "kvorum_resp_protocol_errors_total"
	mPeerRefuse = "kvorum_transport_tls_refused_total"
	mAdminReqs  = "kvorum_admin_http_requests_total"
)

// readUntilClosed reads what c sends until it closes (or 5 s pass).
func readUntilClosed(c net.Conn) (string, error) {
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	return string(b), err
}

// A plain-text client on the TLS port is told so in RESP and disconnected
// (or just disconnected); each node counts the failed handshake.
func attackPlaintextRESP(t *testing.T, f *badActor) {
	for _, p := range f.procs {
		before := f.counter(t, p, mTLSFails, "")
		f.markLog(t, p)
		c, err := net.DialTimeout("tcp", p.client, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte("*1\r\n$8\r\nFLUSHALL\r\n"))
		got, err := readUntilClosed(c)
		c.Close()
		if err != nil || (got != "" && got != "-ERR this port speaks TLS: connect with TLS (redis-cli --tls)\r\n") {
			t.Fatalf("node %d: plain text on the TLS port answered %q, %v; want the TLS error line and the connection closed", p.id, got, err)
		}
		f.waitCounter(t, p, mTLSFails, "", before+1)
		f.waitLog(t, p, "TLS handshake failed", "first record does not look like a TLS handshake")
	}
}

// tlsAttempt connects to addr with cfg, sends a command and returns what
// happened: the handshake's or the first read's error, or the reply.
func tlsAttempt(addr string, cfg *tls.Config, cmd string) (string, error) {
	d := &net.Dialer{Timeout: 2 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	// With TLS 1.3 the client's handshake ends before the server has
	// checked the client's certificate: the refusal comes with the first
	// read.
	// A write may fail (the node closed the connection): the alert it
	// sent first is still there to read.
	_, werr := c.Write([]byte(cmd))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err == nil {
		err = werr
	}
	return line, err
}

// tlsRefused runs a TLS client attempt with cfg (RootCAs and, with a
// certificate, pushCert filled in) against every node and checks the
// alert it gets, the node's counter and its log.
func tlsRefused(t *testing.T, f *badActor, cfg *tls.Config, wantErr string) {
	t.Helper()
	cfg.RootCAs = f.ca.Pool()
	pushCert(cfg)
	for _, p := range f.procs {
		before := f.counter(t, p, mTLSFails, "")
		f.markLog(t, p)
		got, err := tlsAttempt(p.client, cfg.Clone(), "*1\r\n$8\r\nFLUSHALL\r\n")
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("node %d: got %q, %v; want the error %q", p.id, got, err, wantErr)
		}
		f.waitCounter(t, p, mTLSFails, "", before+1)
		f.waitLog(t, p, "TLS handshake failed")
	}
}

func attackTLSNoCert(t *testing.T, f *badActor) {
	tlsRefused(t, f, &tls.Config{}, "tls: certificate required")
}

func attackTLSOtherCA(t *testing.T, f *badActor) {
	tlsRefused(t, f, &tls.Config{Certificates: []tls.Certificate{certPair(t)(f.otherCA.Client("impostor"))}},
		"tls: unknown certificate authority")
}

func attackTLSExpired(t *testing.T, f *badActor) {
	tlsRefused(t, f, &tls.Config{Certificates: []tls.Certificate{certPair(t)(f.ca.ExpiredClient("expired"))}},
		"tls: expired certificate")
}

// A server certificate of the cluster's CA (say, one taken from an admin
// or TLS-port host) is no client certificate: it lacks clientAuth.
func attackTLSServerCert(t *testing.T, f *badActor) {
	tlsRefused(t, f, &tls.Config{Certificates: []tls.Certificate{certPair(t)(f.ca.Server("a server"))}},
		"tls: bad certificate")
}

// A client that speaks only TLS 1.1 (with a good certificate) is refused:
// TLS 1.2 is the oldest served.
func attackTLSOldVersion(t *testing.T, f *badActor) {
	tlsRefused(t, f, &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11,
		Certificates: []tls.Certificate{certPair(t)(f.ca.Client("old client"))}},
		"tls: protocol version not supported")
}

// pushCert makes cfg present certs[0] whatever CAs the server names (Go's
// client otherwise sends no certificate when the server's CertificateRequest
// does not name its issuer, and the attack would be a missing certificate).
func pushCert(cfg *tls.Config) {
	if len(cfg.Certificates) == 0 {
		return
	}
	c := cfg.Certificates[0]
	cfg.Certificates = nil
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &c, nil }
}

// ---- peer port attacks ----

// joinAttempt runs `kvorum start --join` of node 1 as node 4, with the
// extra flags, and returns its output once it gave up.
func (f *badActor) joinAttempt(t *testing.T, name, why string, extra ...string) string {
	t.Helper()
	host := "127.0.0.4"
	dir := filepath.Join(t.TempDir(), name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append([]string{"start", "--id", "4", "--data-dir", dir,
		"--client-addr", freePort(t, host), "--peer-addr", freePort(t, host), "--admin-addr", freePort(t, host),
		"--join", f.procs[0].peer}, extra...)
	out, err := exec.CommandContext(ctx, binary, args...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the refused join did not give up within 30s:\n%s", out)
	}
	if err == nil || !strings.Contains(string(out), "refused by peer TLS") || !strings.Contains(string(out), why) {
		t.Fatalf("joining: %v, want an exit for 'refused by peer TLS' (%s):\n%s", err, why, out)
	}
	return string(out)
}

func attackPeerJoinPlaintext(t *testing.T, f *badActor) {
	p := f.procs[0]
	before := f.counter(t, p, mPeerRefuse, `reason="plaintext"`)
	f.markLog(t, p)
	f.joinAttempt(t, "plain", "this node requires mutual TLS on its peer port")
	// (A refused joiner may have dialed more than once.)
	f.waitCounter(t, p, mPeerRefuse, `reason="plaintext"`, before+1, true)
	f.waitLog(t, p, "refused a plaintext peer connection")
}

func attackPeerJoinOtherCA(t *testing.T, f *badActor) {
	p := f.procs[0]
	cert, err := f.otherCA.Issue("node-4", "127.0.0.4")
	if err != nil {
		t.Fatal(err)
	}
	files, err := f.otherCA.WriteFiles(filepath.Join(t.TempDir(), "other"), "node-4", cert)
	if err != nil {
		t.Fatal(err)
	}
	before := f.counter(t, p, mPeerRefuse, `reason="handshake"`)
	f.markLog(t, p)
	// The joiner does not trust node 1's certificate either, and gives up
	// in the handshake; node 1 counts it all the same.
	f.joinAttempt(t, "other-ca", "x509: certificate signed by unknown authority",
		"--peer-cert-file", files.Cert, "--peer-key-file", files.Key, "--peer-trusted-ca-file", files.CA)
	f.waitCounter(t, p, mPeerRefuse, `reason="handshake"`, before+1, true)
	f.waitLog(t, p, "refused a peer connection: TLS handshake failed")
}

// raftPreface opens a framed Raft stream (transport's streamMagic "KVR\x02",
// kind 'R', cluster id 0: unknown) and carries one frame of a vote
// request's size.
func raftPreface() []byte {
	b := append([]byte("KVR\x02R"), make([]byte, 8)...)
	frame := make([]byte, 64)
	for i := range frame {
		frame[i] = byte(i)
	}
	b = be.BigEndian.AppendUint32(b, uint32(len(frame)))
	return append(b, frame...)
}

// The peer ports' refusals are logged at most once every 10 s per kind
// (transport's refusedLogInterval): each attack of a kind goes to a node
// that has not refused that kind yet, so that its log line is there to
// check.

func attackRaftInjectPlaintext(t *testing.T, f *badActor) {
	p := f.procs[1]
	before := f.counter(t, p, mPeerRefuse, `reason="plaintext"`)
	f.markLog(t, p)
	c, err := net.DialTimeout("tcp", p.peer, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Write(raftPreface())
	got, err := readUntilClosed(c)
	c.Close()
	if got != "KVRt" { // transport's tlsRequiredAnswer
		t.Fatalf("a plaintext Raft stream got %q, %v; want the TLS-required answer and the connection closed", got, err)
	}
	f.waitCounter(t, p, mPeerRefuse, `reason="plaintext"`, before+1)
	f.waitLog(t, p, "refused a plaintext peer connection")
}

// peerTLSInject opens a TLS connection to p's peer port with cfg and
// writes a Raft stream: the node must refuse the handshake (no accepted
// byte, no stream answer).
func peerTLSInject(t *testing.T, f *badActor, p *proc, certs []tls.Certificate, wantErr string) {
	t.Helper()
	before := f.counter(t, p, mPeerRefuse, `reason="handshake"`)
	f.markLog(t, p)
	cfg := &tls.Config{RootCAs: f.ca.Pool(), ServerName: "localhost", Certificates: certs}
	pushCert(cfg)
	got, err := tlsAttempt(p.peer, cfg, string(raftPreface()))
	if err == nil || !strings.Contains(err.Error(), wantErr) {
		t.Fatalf("node %d: a Raft stream over TLS got %q, %v; want the error %q", p.id, got, err, wantErr)
	}
	f.waitCounter(t, p, mPeerRefuse, `reason="handshake"`, before+1)
	f.waitLog(t, p, "refused a peer connection: TLS handshake failed")
}

func attackRaftInjectNoCert(t *testing.T, f *badActor) {
	peerTLSInject(t, f, f.procs[1], nil, "tls: certificate required")
}

func attackRaftInjectOtherCA(t *testing.T, f *badActor) {
	peerTLSInject(t, f, f.procs[2], []tls.Certificate{certPair(t)(f.otherCA.Issue("node-9"))}, "tls: unknown certificate authority")
}

// ---- admin port attacks ----

// attackAdminToken: every path but the probes, each method the API
// serves, without a token and with wrong ones, and with a client
// certificate of the cluster's CA but no token (the nodes have no
// --admin-tls-ca-cert-file: a certificate is no credential there): 401,
// counted as such on the node; the probes answer without one.
func attackAdminToken(t *testing.T, f *badActor) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = f.client.Clone()
	withCert := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	defer tr.CloseIdleConnections()
	endpoints := []struct{ method, path, body string }{
		{http.MethodGet, "/v1/status", ""},
		{http.MethodGet, "/v1/members", ""},
		{http.MethodPost, "/v1/members", `{"id":9,"peer_addr":"127.0.0.9:7000"}`},
		{http.MethodDelete, "/v1/members/3", ""},
		{http.MethodPost, "/v1/transfer-leader", `{"id":2}`},
		{http.MethodGet, "/metrics", ""},
		{http.MethodGet, "/debug/pprof/", ""},
		{http.MethodGet, "/debug/pprof/cmdline", ""},
		{http.MethodGet, "/debug/pprof/heap?debug=1", ""},
		{http.MethodGet, "/v1/no-such-endpoint", ""},
	}
	auths := []string{
		"",
		"Bearer",
		"Bearer ",
		"Bearer wrong-token",
		"Bearer " + f.token + "x",
		"Bearer " + f.token[:len(f.token)-1],
		"Bearer  " + f.token,
		"Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+f.token)),
		f.token,
	}
	for _, p := range f.procs {
		before := f.counter(t, p, mAdminReqs, `handler="unauthorized"`)
		f.markLog(t, p)
		n := 0
		for _, e := range endpoints {
			code, _, body, err := f.adminVia(withCert, p, e.method, e.path, "", e.body)
			if err != nil || code != http.StatusUnauthorized {
				t.Fatalf("node %d: %s %s with a client certificate and no token: %d %v %s; want 401", p.id, e.method, e.path, code, err, body)
			}
			n++
			for _, a := range auths {
				path := e.path
				if a == "" {
					// The token where it is not looked for.
					path += map[bool]string{true: "&", false: "?"}[strings.Contains(path, "?")] + "token=" + f.token
				}
				code, hdr, body, err := f.admin(p, e.method, path, a, e.body)
				if err != nil {
					t.Fatalf("node %d: %s %s: %v", p.id, e.method, path, err)
				}
				if code != http.StatusUnauthorized || !strings.Contains(body, "authentication required") ||
					!strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
					t.Fatalf("node %d: %s %s with Authorization %q: %d %s; want 401 asking for the token", p.id, e.method, path, a, code, body)
				}
				n++
			}
		}
		f.waitCounter(t, p, mAdminReqs, `handler="unauthorized"`, before+float64(n))
		f.waitLog(t, p, "admin request refused: not authenticated", "path=/v1/members", "method=POST")
		for _, probe := range []string{"/healthz", "/readyz"} {
			if code, _, body, err := f.admin(p, http.MethodGet, probe, "", ""); err != nil || code != http.StatusOK {
				t.Fatalf("node %d: %s without a token: %d %v %s; want 200", p.id, probe, code, err, body)
			}
		}
		if code, _, body, err := f.admin(p, http.MethodGet, "/debug/pprof/cmdline", f.bearer(), ""); err != nil || code != http.StatusOK {
			t.Fatalf("node %d: /debug/pprof/cmdline with the token: %d %v %s; want 200 (is --pprof on?)", p.id, code, err, body)
		}
	}
}

// attackAdminPlainHTTP: requests in plain HTTP (with the right token,
// which would have crossed the network in clear) on the HTTPS admin port:
// net/http answers those it recognizes as HTTP (GET, POST, ...) with a
// 400, closes the others (DELETE) unanswered, and logs the failed
// handshake; nothing is served.
func attackAdminPlainHTTP(t *testing.T, f *badActor) {
	p := f.procs[0]
	for _, r := range []struct {
		method, path string
		want         int // 0: the connection closed unanswered
	}{
		{http.MethodGet, "/v1/status", http.StatusBadRequest},
		{http.MethodPost, "/v1/transfer-leader", http.StatusBadRequest},
		{http.MethodDelete, "/v1/members/3", 0},
	} {
		f.markLog(t, p)
		req, _ := http.NewRequest(r.method, "http://"+p.admin+r.path, strings.NewReader(`{"id":2}`))
		req.Header.Set("Authorization", f.bearer())
		code, body := 0, ""
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			code, body = resp.StatusCode, string(b)
		}
		switch {
		case r.want == 0 && (err == nil || !strings.Contains(err.Error(), "EOF")):
			t.Fatalf("plain HTTP %s %s on the admin HTTPS port: %d %q, %v; want the connection closed", r.method, r.path, code, body, err)
		case r.want != 0 && (code != r.want || !strings.Contains(body, "HTTP request to an HTTPS server")):
			t.Fatalf("plain HTTP %s %s on the admin HTTPS port: %d %q, %v; want %d", r.method, r.path, code, body, err, r.want)
		}
		f.waitLog(t, p, "http: TLS handshake error")
	}
}

// ---- bad input over an authenticated connection ----

// attackMalformedRESP: frames a client with a valid certificate may send
// that are malformed or announce more than the node accepts: each gets
// its protocol error and the connection is closed (without the node
// waiting for, or allocating, the announced bytes); each is counted and
// logged; the node goes on serving.
func attackMalformedRESP(t *testing.T, f *badActor) {
	cases := []struct{ name, frame, want string }{ // want: the reply's start
		{"multibulk length not a number", "*x1\r\n$4\r\nPING\r\n", "-ERR Protocol error: invalid multibulk length"},
		{"multibulk length too large", "*99999999999\r\n", "-ERR Protocol error: invalid multibulk length"},
		{"bulk length not a number", "*1\r\n$abc\r\nPING\r\n", "-ERR Protocol error: invalid bulk length"},
		{"bulk length negative", "*1\r\n$-2\r\n", "-ERR Protocol error: invalid bulk length"},
		{"bulk length over the frame limit", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$134217729\r\n", "-ERR Protocol error: command frame too large ("},
		{"bulk length over proto-max-bulk-len", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$536870913\r\n", "-ERR Protocol error: command frame too large ("},
		{"argument count over the frame limit", "*100000000\r\n", "-ERR Protocol error: too many arguments ("},
		{"bulk length of 2^63", "*2\r\n$3\r\nGET\r\n$9223372036854775808\r\n", "-ERR Protocol error: invalid bulk length"},
		{"not a bulk inside a multibulk", "*2\r\n$3\r\nDEL\r\n:1\r\n", "-ERR Protocol error: expected '$', got ':'"},
		{"bulk longer than announced", "*2\r\n$3\r\nDEL\r\n$5\r\nstr:10\r\n", "-ERR Protocol error: expected CRLF after bulk argument"},
		{"unbalanced quotes inline", "SET \"str:1 x\r\n", "-ERR Protocol error: unbalanced quotes in request"},
		{"inline line without an end", strings.Repeat("A", 70<<10), "-ERR Protocol error: too big inline request"},
	}
	for _, p := range f.procs {
		before := f.counter(t, p, mProtoErrs, "")
		f.markLog(t, p)
		for _, tc := range cases {
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", p.client, f.client.Clone())
			if err != nil {
				t.Fatalf("node %d: %s: dial: %v", p.id, tc.name, err)
			}
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Write([]byte(tc.frame)); err != nil {
				c.Close()
				t.Fatalf("node %d: %s: write: %v", p.id, tc.name, err)
			}
			got, err := readUntilClosed(c)
			c.Close()
			if err != nil || !strings.HasPrefix(got, tc.want) || strings.Index(got, "\r\n") != len(got)-2 {
				t.Fatalf("node %d: %s: got %q, %v; want %q and the connection closed", p.id, tc.name, got, err, tc.want)
			}
		}
		f.waitCounter(t, p, mProtoErrs, "", before+float64(len(cases)))
		f.waitLog(t, p, "resp: protocol error; closing connection")
	}
}
