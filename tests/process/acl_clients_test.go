package process

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvorum/kvorum/internal/devca"
)

// TestACLTLSClientSmoke: redis-cli, go-redis and redis-py connect as
// applications do to a 3-node cluster with a TLS-only client port that
// requires a client certificate and ACL users (the bad-actor fixture:
// --aclfile with the app user): each authenticates as app with its
// password over TLS with the cluster's CA and a client certificate, SETs
// and GETs (reading another client's write through another node), is
// refused a key outside app:* with NOPERM, and a wrong password is
// refused with WRONGPASS. Fails without redis-cli or python3-redis
// (scripts/ensure-test-deps.sh and .ci/run install them).
func TestACLTLSClientSmoke(t *testing.T) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatal("redis-cli not found: apt-get install redis-tools (scripts/ensure-test-deps.sh does this)")
	}
	requireRedisPy(t)
	f := newBadActor(t)
	f.waitReady()
	files, err := f.ca.WriteFiles(filepath.Join(f.dir, "client"), "client", mustIssued(t)(f.ca.Client("smoke client")))
	if err != nil {
		t.Fatal(err)
	}
	p1, p2, p3 := f.procs[0], f.procs[1], f.procs[2]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	redisCLI := func(p *proc, user, pass string, args ...string) (string, error) {
		host, port, _ := strings.Cut(p.client, ":")
		full := append([]string{"--tls", "--cacert", files.CA, "--cert", files.Cert, "--key", files.Key,
			"-h", host, "-p", port, "--user", user, "--pass", pass, "--no-auth-warning"}, args...)
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(c, cli, full...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	t.Run("redis-cli", func(t *testing.T) {
		if out, err := redisCLI(p1, "app", aclAppPass, "SET", "app:cli", "1"); err != nil || out != "OK" {
			t.Fatalf("redis-cli SET app:cli 1: %q, %v", out, err)
		}
		if out, err := redisCLI(p1, "app", aclAppPass, "GET", "app:cli"); err != nil || out != "1" {
			t.Fatalf("redis-cli GET app:cli: %q, %v", out, err)
		}
		if out, _ := redisCLI(p1, "app", aclAppPass, "SET", "other:cli", "1"); out != errNoPermKey {
			t.Fatalf("redis-cli SET other:cli as app: %q, want %q", out, errNoPermKey)
		}
		out, _ := redisCLI(p1, "app", "wrong", "SET", "app:cli", "2")
		if !strings.Contains(out, errWrongPass) || !strings.Contains(out, errNoAuth) {
			t.Fatalf("redis-cli with a wrong password: %q, want %q and then %q", out, errWrongPass, errNoAuth)
		}
	})

	goRedis := func(p *proc, pass string, protocol int) *redis.Client {
		cl := redis.NewClient(&redis.Options{Addr: p.client, TLSConfig: f.client.Clone(), Protocol: protocol,
			Username: "app", Password: pass, MaxRetries: -1,
			DialTimeout: 2 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 5 * time.Second})
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	t.Run("go-redis", func(t *testing.T) {
		for _, protocol := range []int{2, 3} {
			cl := goRedis(p2, aclAppPass, protocol)
			want(t, cl.Get(ctx, "app:cli"), "1") // redis-cli's write through node 1
			want(t, cl.Set(ctx, "app:go", "2", 0), "OK")
			want(t, cl.Get(ctx, "app:go"), "2")
			want(t, cl.Do(ctx, "ACL", "WHOAMI"), any("app"))
			wantErr(t, cl.Set(ctx, "other:go", "2", 0), errNoPermKey)
			wantErr(t, goRedis(p2, "wrong", protocol).Ping(ctx), errWrongPass)
		}
	})

	t.Run("redis-py", func(t *testing.T) {
		host, port, _ := strings.Cut(p3.client, ":")
		script := filepath.Join(t.TempDir(), "acl_tls.py")
		if err := os.WriteFile(script, []byte(redisPyACLTLS), 0o644); err != nil {
			t.Fatal(err)
		}
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(c, pythonWithRedis, "-u", script, host, port, files.CA, files.Cert, files.Key, aclAppPass)
		cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "redis-py ACL TLS smoke: ok") {
			t.Fatalf("redis-py: %v:\n%s", err, out)
		}
		t.Logf("redis-py:\n%s", out)
	})
	if t.Failed() {
		f.dumpLogs()
	}
}

// mustIssued(t)(ca.Client(...)) is the issued certificate, failing t if
// it could not be made.
func mustIssued(t *testing.T) func(v *devca.Issued, err error) *devca.Issued {
	return func(v *devca.Issued, err error) *devca.Issued {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// redisPyACLTLS: argv host port ca cert key password.
const redisPyACLTLS = `import sys
import redis

host, port, ca, cert, key, password = sys.argv[1:7]


def client(pw):
    return redis.Redis(host=host, port=int(port), ssl=True, ssl_ca_certs=ca, ssl_certfile=cert,
                       ssl_keyfile=key, ssl_check_hostname=True, username="app", password=pw,
                       socket_timeout=10, retry_on_timeout=False)


r = client(password)
assert r.get("app:go") == b"2", r.get("app:go")  # go-redis's write through node 2
assert r.set("app:py", "3") is True
assert r.get("app:py") == b"3"
assert r.execute_command("ACL", "WHOAMI") == b"app"
try:
    r.set("other:py", "3")
    sys.exit("SET other:py as app was not refused")
except redis.exceptions.ResponseError as e:
    assert "no permissions to access one of the keys" in str(e), repr(e)
    print("NOPERM:", e)
try:
    client("wrong").ping()
    sys.exit("a wrong password was not refused")
except (redis.exceptions.ResponseError, redis.exceptions.AuthenticationError) as e:
    # redis-py 4.3 raises the reply of its AUTH as a ResponseError with
    # the code; newer ones map WRONGPASS to AuthenticationError.
    assert str(e).startswith("WRONGPASS invalid username-password pair") or (
        isinstance(e, redis.exceptions.AuthenticationError) and "invalid username-password pair" in str(e)), repr(e)
    print("WRONGPASS:", type(e).__name__, e)
print("redis-py ACL TLS smoke: ok")
`
