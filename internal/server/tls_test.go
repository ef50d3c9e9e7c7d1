package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvorum/kvorum/internal/devca"
)

// tlsFiles is a CA, a server certificate it signed and their files.
type tlsFiles struct {
	ca                *devca.CA
	caFile, cert, key string
}

func newTLSFiles(t *testing.T) tlsFiles {
	t.Helper()
	dir := t.TempDir()
	ca, err := devca.New("kvorum test CA")
	if err != nil {
		t.Fatal(err)
	}
	f := tlsFiles{ca: ca, caFile: filepath.Join(dir, "ca.crt"), cert: filepath.Join(dir, "server.crt"), key: filepath.Join(dir, "server.key")}
	if err := ca.WriteCA(f.caFile); err != nil {
		t.Fatal(err)
	}
	f.issue(t, "server-1")
	return f
}

// issue writes a new server certificate named cn over the files.
func (f tlsFiles) issue(t *testing.T, cn string) {
	t.Helper()
	leaf, err := f.ca.Server(cn)
	if err != nil {
		t.Fatal(err)
	}
	if err := leaf.Write(f.cert, f.key); err != nil {
		t.Fatal(err)
	}
}

// clientCert returns a client certificate signed by ca.
func clientCert(t *testing.T, ca *devca.CA) tls.Certificate {
	t.Helper()
	leaf, err := ca.Client("client")
	if err != nil {
		t.Fatal(err)
	}
	c, err := leaf.TLS()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func tlsClient(t *testing.T, addr string, cfg *tls.Config) *redis.Client {
	t.Helper()
	cl := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: cfg, MaxRetries: -1, DialTimeout: 5 * time.Second,
		ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second})
	t.Cleanup(func() { cl.Close() })
	return cl
}

// presented returns the common name of the certificate a new TLS
// connection to addr is shown.
func presented(t *testing.T, addr string, roots *x509.CertPool) string {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("TLS dial %s: %v", addr, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// TestClientTLS: a node with a TLS client port serves go-redis over TLS
// next to its plain port, refuses a plain-text client there without
// harm, answers CONFIG GET tls-*, and picks up a rotated certificate on
// new connections.
func TestClientTLS(t *testing.T) {
	files := newTLSFiles(t)
	c := newClusterWith(t, 1, func(_ uint64, cfg *Config) {
		cfg.TLSClientAddr = freeAddr(t)
		cfg.TLSCertFile, cfg.TLSKeyFile = files.cert, files.key
	})
	n := c.node(1)
	ctx := testCtx(t, 60*time.Second)
	tlsAddr := n.TLSClientAddr()
	roots := files.ca.Pool()
	cl := tlsClient(t, tlsAddr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	if err := cl.Set(ctx, "greeting", "hello over tls", 0).Err(); err != nil {
		t.Fatalf("SET over TLS: %v", err)
	}
	if v, err := cl.Get(ctx, "greeting").Result(); err != nil || v != "hello over tls" {
		t.Fatalf("GET over TLS: %q %v", v, err)
	}
	// The plain port reads the same data.
	plain := c.client(1)
	if v, err := plain.Get(ctx, "greeting").Result(); err != nil || v != "hello over tls" {
		t.Fatalf("GET on the plain port: %q %v", v, err)
	}

	// CONFIG GET answers the node's values; INFO's tcp_port is the plain one.
	_, plainPort, _ := net.SplitHostPort(n.ClientAddr())
	_, tlsPort, _ := net.SplitHostPort(tlsAddr)
	for param, want := range map[string]string{
		"tls-port": tlsPort, "port": plainPort, "tls-cert-file": files.cert, "tls-key-file": files.key,
		"tls-ca-cert-file": "", "tls-auth-clients": "no",
	} {
		got, err := cl.ConfigGet(ctx, param).Result()
		if err != nil || got[param] != want {
			t.Errorf("CONFIG GET %s = %v, %v; want %q", param, got, err, want)
		}
	}
	if err := cl.ConfigSet(ctx, "tls-cert-file", "/x").Err(); err == nil || !strings.Contains(err.Error(), "re-reads the certificate files") {
		t.Errorf("CONFIG SET tls-cert-file: %v", err)
	}
	if info, err := cl.Info(ctx, "server").Result(); err != nil || !strings.Contains(info, "tcp_port:"+plainPort+"\r\n") {
		t.Errorf("INFO server over TLS: tcp_port is not %s: %v\n%s", plainPort, err, info)
	}

	// A plain-text client on the TLS port is disconnected, and the node
	// goes on serving.
	for i := 0; i < 3; i++ {
		raw, err := net.DialTimeout("tcp", tlsAddr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = raw.SetDeadline(time.Now().Add(15 * time.Second))
		if _, err := raw.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
			t.Fatal(err)
		}
		rd := bufio.NewReader(raw)
		line, err := rd.ReadString('\n')
		if err != nil || line != "-ERR this port speaks TLS: connect with TLS (redis-cli --tls)\r\n" {
			t.Fatalf("plain text on the TLS port: read %q, %v; want an error reply", line, err)
		}
		line, err = rd.ReadString('\n')
		raw.Close()
		if err == nil {
			t.Fatalf("plain text on the TLS port: read %q after the error; want the connection closed", line)
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("plain text on the TLS port: the connection stayed open for 15s")
		}
	}
	plainOnTLS := redis.NewClient(&redis.Options{Addr: tlsAddr, MaxRetries: -1, DialTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second})
	// (go-redis reads the error reply as HELLO's refusal and fails on the
	// next command: the connection is closed.)
	if err := plainOnTLS.Ping(ctx).Err(); err == nil {
		t.Error("a plain go-redis client got an answer on the TLS port")
	}
	plainOnTLS.Close()
	if v, err := cl.Get(ctx, "greeting").Result(); err != nil || v != "hello over tls" {
		t.Fatalf("GET over TLS after plain-text clients: %q %v", v, err)
	}

	// A client that trusts another CA refuses the node's certificate.
	other, err := devca.New("other")
	if err != nil {
		t.Fatal(err)
	}
	if err := tlsClient(t, tlsAddr, &tls.Config{RootCAs: other.Pool(), ServerName: "127.0.0.1"}).Ping(ctx).Err(); err == nil {
		t.Error("a client trusting another CA connected")
	}

	// Rotation: new files, and a new connection sees the new certificate
	// (re-read within a second); the old connection keeps working.
	if cn := presented(t, tlsAddr, roots); cn != "server-1" {
		t.Fatalf("certificate %q, want server-1", cn)
	}
	files.issue(t, "server-2")
	deadline := time.Now().Add(10 * time.Second)
	for presented(t, tlsAddr, roots) != "server-2" {
		if time.Now().After(deadline) {
			t.Fatal("the rotated certificate was not served within 10s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if v, err := cl.Get(ctx, "greeting").Result(); err != nil || v != "hello over tls" {
		t.Fatalf("GET over TLS after the rotation: %q %v", v, err)
	}
	fresh := tlsClient(t, tlsAddr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	if err := fresh.Set(ctx, "after-rotation", "1", 0).Err(); err != nil {
		t.Fatalf("SET on a new connection after the rotation: %v", err)
	}

	// redis-cli, when installed, speaks to the TLS port as to Redis.
	t.Run("redis-cli", func(t *testing.T) {
		cli, err := exec.LookPath("redis-cli")
		if err != nil {
			t.Skip("redis-cli is not installed: the redis-cli --tls check did not run")
		}
		if out, err := exec.Command(cli, "-v").CombinedOutput(); err != nil || !hasTLSBuild(cli) {
			t.Skipf("redis-cli (%s) is built without TLS: the redis-cli --tls check did not run", strings.TrimSpace(string(out)))
		}
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		out, err := exec.CommandContext(cctx, cli, "--tls", "--cacert", files.caFile, "-h", "127.0.0.1", "-p", tlsPort, "get", "greeting").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "hello over tls" {
			t.Errorf("redis-cli --tls get: %v\n%s", err, out)
		}
	})
	// redis-py with ssl=True, when Debian's python3-redis is installed.
	t.Run("redis-py", func(t *testing.T) {
		py := "/usr/bin/python3"
		if err := exec.Command(py, "-c", "import redis, ssl").Run(); err != nil {
			t.Skipf("%s cannot import redis (apt-get install python3-redis): the redis-py ssl=True check did not run", py)
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		script := `import sys, redis
r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]), ssl=True, ssl_ca_certs=sys.argv[2], socket_timeout=10)
r.set("from-python", "ok")
print(r.get("greeting").decode(), r.get("from-python").decode())`
		out, err := exec.CommandContext(cctx, py, "-c", script, tlsPort, files.caFile).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "hello over tls ok" {
			t.Errorf("redis-py ssl=True: %v\n%s", err, out)
		}
	})
}

// hasTLSBuild reports whether redis-cli knows --tls (Debian's is built
// with it).
func hasTLSBuild(cli string) bool {
	out, _ := exec.Command(cli, "--help").CombinedOutput()
	return strings.Contains(string(out), "--tls")
}

// TestClientTLSAuthClients: with tls-auth-clients yes and the plain port
// off, only clients with a certificate of the CA get in; with optional,
// clients without one do too.
func TestClientTLSAuthClients(t *testing.T) {
	files := newTLSFiles(t)
	for _, auth := range []string{"yes", "optional"} {
		t.Run(auth, func(t *testing.T) {
			c := newClusterWith(t, 1, func(_ uint64, cfg *Config) {
				cfg.ClientAddr = "-"
				cfg.TLSClientAddr = freeAddr(t)
				cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSCAFile = files.cert, files.key, files.caFile
				cfg.TLSAuthClients = auth
			})
			n := c.node(1)
			ctx := testCtx(t, 30*time.Second)
			if n.ClientAddr() != "-" {
				t.Errorf("ClientAddr %q with the plain port off", n.ClientAddr())
			}
			roots := files.ca.Pool()
			with := tlsClient(t, n.TLSClientAddr(), &tls.Config{RootCAs: roots, ServerName: "127.0.0.1",
				Certificates: []tls.Certificate{clientCert(t, files.ca)}})
			if err := with.Set(ctx, "k", auth, 0).Err(); err != nil {
				t.Fatalf("SET with a client certificate: %v", err)
			}
			without := tlsClient(t, n.TLSClientAddr(), &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
			err := without.Ping(ctx).Err()
			if auth == "yes" && err == nil {
				t.Error("a client without a certificate was served with tls-auth-clients yes")
			}
			if auth == "optional" && err != nil {
				t.Errorf("a client without a certificate, tls-auth-clients optional: %v", err)
			}
			// A certificate of another CA is refused in both modes.
			other, err := devca.New("other")
			if err != nil {
				t.Fatal(err)
			}
			foreign := tlsClient(t, n.TLSClientAddr(), &tls.Config{RootCAs: roots, ServerName: "127.0.0.1",
				GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
					c := clientCert(t, other)
					return &c, nil
				}})
			if err := foreign.Ping(ctx).Err(); err == nil {
				t.Error("a client certificate of another CA was accepted")
			}
			for param, want := range map[string]string{"port": "0", "tls-auth-clients": auth, "tls-ca-cert-file": files.caFile} {
				if got, err := with.ConfigGet(ctx, param).Result(); err != nil || got[param] != want {
					t.Errorf("CONFIG GET %s = %v, %v; want %q", param, got, err, want)
				}
			}
			if info, err := with.Info(ctx, "server").Result(); err != nil || !strings.Contains(info, "tcp_port:0\r\n") {
				t.Errorf("INFO server with the plain port off: %v\n%s", err, info)
			}
		})
	}
}

// TestTLSStartErrors: Start refuses bad certificate files with a message
// that names the flag and the file.
func TestTLSStartErrors(t *testing.T) {
	files := newTLSFiles(t)
	dir := t.TempDir()
	otherKey := filepath.Join(dir, "other.key")
	leaf, err := files.ca.Server("other")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(otherKey, leaf.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.crt")
	for _, c := range []struct {
		name   string
		adjust func(*Config)
		want   string
	}{
		{"missing cert", func(c *Config) { c.TLSCertFile = missing }, "--tls-cert-file: open " + missing},
		{"mismatched key", func(c *Config) { c.TLSKeyFile = otherKey }, "--tls-key-file " + otherKey + " does not match"},
		{"no cert", func(c *Config) { c.TLSCertFile = "" }, "--tls-port needs --tls-cert-file and --tls-key-file"},
		{"auth without CA", func(c *Config) { c.TLSAuthClients = "yes" }, "--tls-auth-clients yes needs --tls-ca-cert-file"},
		{"no port at all", func(c *Config) { c.ClientAddr, c.TLSClientAddr, c.TLSCertFile, c.TLSKeyFile = "-", "", "", "" }, "no --tls-port"},
		{"admin cert missing", func(c *Config) { c.AdminAddr, c.AdminTLSCertFile, c.AdminTLSKeyFile = freeAddr(t), missing, files.key }, "--admin-tls-cert-file: open"},
	} {
		cfg := nodeConfig(t, 1, nil)
		cfg.PeerInterceptor = nil
		cfg.TLSClientAddr = freeAddr(t)
		cfg.TLSCertFile, cfg.TLSKeyFile = files.cert, files.key
		c.adjust(&cfg)
		n, err := Start(cfg)
		if err == nil {
			n.Stop()
			t.Errorf("%s: Start succeeded", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
