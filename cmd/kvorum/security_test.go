package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvorum/kvorum/internal/admin"
	"github.com/kvorum/kvorum/internal/devca"
	"github.com/kvorum/kvorum/internal/server"
	"github.com/kvorum/kvorum/internal/testport"
	"github.com/kvorum/kvorum/internal/tlsconf"
)

// testCerts writes a CA and a server certificate for 127.0.0.1 into dir.
func testCerts(t *testing.T, dir string) (ca *devca.CA, caFile, cert, key string) {
	t.Helper()
	ca, err := devca.New("kvorum test CA")
	if err != nil {
		t.Fatal(err)
	}
	caFile, cert, key = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	leaf, err := ca.Server("kvorum")
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.WriteCA(caFile); err != nil {
		t.Fatal(err)
	}
	if err := leaf.Write(cert, key); err != nil {
		t.Fatal(err)
	}
	return ca, caFile, cert, key
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestParseStartSecurity(t *testing.T) {
	dir := t.TempDir()
	tokenFile := writeFile(t, filepath.Join(dir, "token"), "  s3cret\n")
	f, err := parseStart([]string{"--data-dir", dir, "--client-addr", "0.0.0.0:6379", "--port", "0", "--tls-port", "6380",
		"--tls-cert-file", "c", "--tls-key-file", "k", "--tls-ca-cert-file", "ca", "--tls-auth-clients", "optional",
		"--admin-token-file", tokenFile, "--admin-tls-cert-file", "ac", "--admin-tls-key-file", "ak", "--pprof"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c := f.cfg
	if c.ClientAddr != "-" || c.TLSClientAddr != "0.0.0.0:6380" || c.TLSCertFile != "c" || c.TLSKeyFile != "k" ||
		c.TLSCAFile != "ca" || c.TLSAuthClients != "optional" || c.AdminToken != "s3cret" ||
		c.AdminTLSCertFile != "ac" || c.AdminTLSKeyFile != "ak" || !c.Pprof {
		t.Errorf("config: %+v", c)
	}
	f, err = parseStart([]string{"--data-dir", dir, "--port", "7000"}, io.Discard)
	if err != nil || f.cfg.ClientAddr != "127.0.0.1:7000" || f.cfg.TLSClientAddr != "" || f.cfg.Pprof || f.cfg.AdminToken != "" {
		t.Errorf("--port 7000: %v %+v", err, f)
	}

	empty := writeFile(t, filepath.Join(dir, "empty"), "\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-port", "6380"}, "--tls-port needs --tls-cert-file and --tls-key-file"},
		{[]string{"--tls-cert-file", "c", "--tls-key-file", "k"}, "need --tls-port"},
		{[]string{"--port", "0"}, "no --tls-port is set"},
		{[]string{"--port", "x"}, `--port "x": want a port number`},
		{[]string{"--tls-port", "70000"}, "--tls-port 70000: want 1-65535"},
		{[]string{"--tls-port", "6379", "--tls-cert-file", "c", "--tls-key-file", "k"}, "is the plain-text port too"},
		{[]string{"--tls-port", "6380", "--tls-cert-file", "c", "--tls-key-file", "k", "--tls-auth-clients", "maybe"}, `--tls-auth-clients "maybe": want yes, no or optional`},
		{[]string{"--tls-port", "6380", "--tls-cert-file", "c", "--tls-key-file", "k", "--tls-auth-clients", "yes"}, "needs --tls-ca-cert-file"},
		{[]string{"--admin-token-file", empty}, "--admin-token-file: " + empty + " is empty"},
		{[]string{"--admin-token-file", filepath.Join(dir, "nope")}, "--admin-token-file: open"},
		{[]string{"--admin-tls-cert-file", "c"}, "--admin-tls-cert-file and --admin-tls-key-file go together"},
		{[]string{"--admin-tls-ca-cert-file", "c"}, "--admin-tls-ca-cert-file needs --admin-tls-cert-file"},
		{[]string{"--admin-addr", "-", "--pprof"}, "--pprof has no use with --admin-addr -"},
	} {
		_, err := parseStart(append([]string{"--data-dir", dir}, c.args...), io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}

func TestCtlSecurityFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ctl", "--token", "a", "--token-file", "f", "status"}, "give the token once"},
		{[]string{"ctl", "--cert", "c", "status"}, "--cert and --key go together"},
		{[]string{"ctl", "--insecure", "status"}, "flag provided but not defined: --insecure"},
	} {
		code, _, errOut := runCmd(c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d %q, want %q", c.args, code, errOut, c.want)
		}
	}
	if got, _ := adminURL("127.0.0.1:8379", true); got != "https://127.0.0.1:8379" {
		t.Errorf("adminURL with --cacert: %q", got)
	}
}

// startNode runs `kvorum start` with args until the test ends and returns
// the node.
func startNode(t *testing.T, args ...string) *server.Node {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan *server.Node, 1)
	done := make(chan error, 1)
	var out, errOut syncBuffer
	go func() {
		done <- runStartWith(ctx, args, &out, &errOut, func(cfg server.Config) (*server.Node, error) {
			n, err := server.Start(cfg)
			if err == nil {
				started <- n
			}
			return n, err
		})
	}()
	var n *server.Node
	select {
	case n = <-started:
	case err := <-done:
		cancel()
		t.Fatalf("kvorum start: %v\n%s", err, errOut.String())
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("kvorum start did not start a node within 30s")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("kvorum start returned %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("kvorum start did not stop within 30s")
		}
	})
	return n
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freeTestAddr(t *testing.T) string {
	t.Helper()
	a, err := testport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestStartSecured: `kvorum start` with the plain client port off, a TLS
// client port, and an HTTPS admin port behind a token; go-redis and
// `kvorum ctl` reach it, and what lacks the token or the TLS is refused.
func TestStartSecured(t *testing.T) {
	dir := t.TempDir()
	ca, caFile, cert, key := testCerts(t, dir)
	tokenFile := writeFile(t, filepath.Join(dir, "admin.token"), "token-"+strings.Repeat("x", 24)+"\n")
	plainAddr, peerAddr, adminAddr := freeTestAddr(t), freeTestAddr(t), freeTestAddr(t)
	_, tlsPort, _ := net.SplitHostPort(freeTestAddr(t))
	n := startNode(t, "--data-dir", filepath.Join(dir, "data"), "--id", "1",
		"--client-addr", plainAddr, "--port", "0", "--tls-port", tlsPort,
		"--tls-cert-file", cert, "--tls-key-file", key,
		"--peer-addr", peerAddr, "--admin-addr", adminAddr,
		"--admin-token-file", tokenFile, "--admin-tls-cert-file", cert, "--admin-tls-key-file", key,
		"--log-level", "error")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Nothing listens on the plain-text address.
	if c, err := net.DialTimeout("tcp", plainAddr, 2*time.Second); err == nil {
		c.Close()
		t.Errorf("something listens on %s with --port 0", plainAddr)
	}
	tlsAddr := net.JoinHostPort("127.0.0.1", tlsPort)
	if n.TLSClientAddr() != tlsAddr {
		t.Errorf("TLS client address %q, want %q", n.TLSClientAddr(), tlsAddr)
	}
	cl := redis.NewClient(&redis.Options{Addr: tlsAddr, TLSConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"},
		MaxRetries: -1, DialTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second})
	defer cl.Close()
	if err := n.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET over TLS: %v", err)
	}
	if v, err := cl.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET over TLS: %q %v", v, err)
	}

	// kvorum ctl: HTTPS with --cacert and the token.
	code, out, errOut := runCmd("ctl", "--addr", adminAddr, "--cacert", caFile, "--token-file", tokenFile, "status")
	if code != 0 || !strings.Contains(out, "role:") || statusField(out, "client addr") != "-" ||
		statusField(out, "tls client addr") != tlsAddr {
		t.Errorf("ctl status with --token-file: exit %d\n%s%s", code, out, errOut)
	}
	token := strings.TrimSpace(mustRead(t, tokenFile))
	if code, out, errOut := runCmd("ctl", "status", "--addr", adminAddr, "--cacert", caFile, "--token", token); code != 0 || !strings.Contains(out, "role:") {
		t.Errorf("ctl status --token: exit %d\n%s%s", code, out, errOut)
	}
	t.Setenv(ctlTokenEnv, token)
	if code, _, errOut := runCmd("ctl", "--addr", adminAddr, "--cacert", caFile, "member", "list"); code != 0 {
		t.Errorf("ctl member list with %s: exit %d %s", ctlTokenEnv, code, errOut)
	}
	t.Setenv(ctlTokenEnv, "")
	code, _, errOut = runCmd("ctl", "--addr", adminAddr, "--cacert", caFile, "status")
	if code != 1 || !strings.Contains(errOut, "authentication required") || !strings.Contains(errOut, "HTTP 401") {
		t.Errorf("ctl status without a token: exit %d %q", code, errOut)
	}
	code, _, errOut = runCmd("ctl", "--addr", adminAddr, "--cacert", caFile, "--token", "wrong", "status")
	if code != 1 || !strings.Contains(errOut, "refused the token") {
		t.Errorf("ctl status with a wrong token: exit %d %q", code, errOut)
	}
	code, _, errOut = runCmd("ctl", "--addr", adminAddr, "--token", token, "status")
	if code != 1 || !strings.Contains(errOut, "speaks HTTPS: give --cacert") {
		t.Errorf("ctl over plain HTTP to the HTTPS port: exit %d %q", code, errOut)
	}
	other, _, _, _ := testCerts(t, t.TempDir())
	otherCA := filepath.Join(t.TempDir(), "other.crt")
	if err := other.WriteCA(otherCA); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCmd("ctl", "--addr", "https://"+adminAddr, "--cacert", otherCA, "--token", token, "status")
	if code != 1 || !strings.Contains(errOut, "not signed by a CA this client trusts") {
		t.Errorf("ctl with the wrong CA: exit %d %q", code, errOut)
	}

	// The probes stay open; pprof is off without --pprof.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 401, "/debug/pprof/": 401} {
		resp, err := hc.Get("https://" + adminAddr + path)
		if err != nil {
			t.Errorf("GET %s: %v", path, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s without a token: %d, want %d", path, resp.StatusCode, want)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, "https://"+adminAddr+"/debug/pprof/", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, err := hc.Do(req); err != nil || resp.StatusCode != 404 {
		t.Errorf("pprof with the token but no --pprof: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// statusField returns the value of a "name: value" line of ctl status.
func statusField(out, name string) string {
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// TestDemoTLS: `kvorum demo --tls` serves TLS clients with the CA it
// prints.
func TestDemoTLS(t *testing.T) {
	for _, tc := range []struct {
		name string
		flag string
		auth bool // --secure: a password, no plain-text port, an admin token
	}{{"tls", "--tls", false}, {"secure", "--secure", true}} {
		t.Run(tc.name, func(t *testing.T) { testDemoTLS(t, tc.flag, tc.auth) })
	}
}

func testDemoTLS(t *testing.T, flag string, secure bool) {
	if testing.Short() {
		t.Skip("starts a demo cluster")
	}
	var port int
	for i := 0; i < 20 && port == 0; i++ {
		a := freeTestAddr(t)
		_, ps, _ := net.SplitHostPort(a)
		p, _ := strconv.Atoi(ps)
		ok := p+demoTLSOffset < 65536
		for _, off := range []int{demoPeerOffset, demoAdminOffset, demoTLSOffset} {
			if l, err := net.Listen("tcp", demoAddr(p+off)); err == nil {
				l.Close()
			} else {
				ok = false
			}
		}
		if ok {
			port = p
		}
	}
	if port == 0 {
		t.Fatal("no free port range for the demo")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- runDemo(ctx, []string{"--nodes", "1", "--port", strconv.Itoa(port), "--data-dir", dir, flag}, out, io.Discard)
	}()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("demo: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("demo did not stop within 30s")
		}
	}()
	caFile := filepath.Join(dir, "tls", "ca.crt")
	want := fmt.Sprintf("node 1  redis-cli --tls --cacert %s -p %d", caFile, port+demoTLSOffset)
	var password string
	if secure {
		want = fmt.Sprintf("node 1  redis-cli --tls --cacert %s --user default --pass ", caFile)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("demo output lacks %q:\n%s", want, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if secure {
		rest := out.String()[strings.Index(out.String(), want)+len(want):]
		password = strings.Fields(rest)[0]
		if c, err := net.Dial("tcp", demoAddr(port)); err == nil {
			c.Close()
			t.Error("--secure: the plain-text client port accepts connections")
		}
		if code, _, _ := runCmd("ctl", "--addr", demoAddr(port+demoAdminOffset), "status"); code == 0 {
			t.Error("--secure: ctl status without the token succeeded")
		}
		if code, o, e := runCmd("ctl", "--addr", demoAddr(port+demoAdminOffset), "--token-file", filepath.Join(dir, "admin.token"), "status"); code != 0 {
			t.Errorf("--secure: ctl status with the token: exit %d\n%s%s", code, o, e)
		}
	}
	pool, err := tlsconf.LoadCA(caFile)
	if err != nil {
		t.Fatal(err)
	}
	opts := redis.Options{Addr: demoAddr(port + demoTLSOffset), TLSConfig: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"},
		MaxRetries: -1, DialTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second}
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	defer rcancel()
	if secure {
		anon := redis.NewClient(&opts)
		err := anon.Set(rctx, "hello", "x", 0).Err()
		anon.Close()
		if err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
			t.Fatalf("--secure: SET without AUTH: %v", err)
		}
		opts.Password = password
	}
	cl := redis.NewClient(&opts)
	defer cl.Close()
	if err := cl.Set(rctx, "hello", "tls", 0).Err(); err != nil {
		t.Fatalf("SET over the demo's TLS port: %v", err)
	}
}

// TestCtlClientCert: ctl --cert/--key reach an admin server that admits
// client certificates of its CA instead of a token.
func TestCtlClientCert(t *testing.T) {
	dir := t.TempDir()
	ca, caFile, cert, key := testCerts(t, dir)
	f := &fakeNode{st: admin.Status{NodeID: 1, Role: "leader", Leader: 1, Ready: true}}
	srvCert, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(admin.New(admin.Config{Node: f, CertAuth: true}).Handler())
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{srvCert}, ClientCAs: ca.Pool(), ClientAuth: tls.VerifyClientCertIfGiven}
	ts.StartTLS()
	defer ts.Close()
	leaf, err := ca.Client("operator")
	if err != nil {
		t.Fatal(err)
	}
	ccert, ckey := filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	if err := leaf.Write(ccert, ckey); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(ts.URL, "https://")
	if code, out, errOut := runCmd("ctl", "--addr", addr, "--cacert", caFile, "--cert", ccert, "--key", ckey, "status"); code != 0 || !strings.Contains(out, "role:") {
		t.Errorf("ctl with a client certificate: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut := runCmd("ctl", "--addr", addr, "--cacert", caFile, "status")
	if code != 1 || !strings.Contains(errOut, "client certificate") || !strings.Contains(errOut, "HTTP 401") {
		t.Errorf("ctl without a client certificate: exit %d %q", code, errOut)
	}
}

func TestWarnInsecureAdmin(t *testing.T) {
	for _, c := range []struct {
		cfg  server.Config
		warn bool
	}{
		{server.Config{AdminAddr: "0.0.0.0:8379", AdminToken: "t"}, true},
		{server.Config{AdminAddr: "10.0.0.1:8379", AdminToken: "t"}, true},
		{server.Config{AdminAddr: "127.0.0.1:8379", AdminToken: "t"}, false},
		{server.Config{AdminAddr: "[::1]:8379", AdminToken: "t"}, false},
		{server.Config{AdminAddr: "0.0.0.0:8379", AdminToken: "t", AdminTLSCertFile: "c"}, false},
		{server.Config{AdminAddr: "0.0.0.0:8379"}, false},
	} {
		var b strings.Builder
		log, _ := newLogger(&b, "warn", "text")
		warnInsecureAdmin(log, &c.cfg)
		if got := strings.Contains(b.String(), "clear text"); got != c.warn {
			t.Errorf("%+v: warned %v, want %v", c.cfg, got, c.warn)
		}
	}
}

// TestExposureWarnings: a port bound beyond loopback without the
// credential that protects it gets a warning naming the port; loopback
// ports and protected ports get none.
func TestExposureWarnings(t *testing.T) {
	local := server.Config{ClientAddr: "127.0.0.1:6379", PeerAddr: "127.0.0.1:7379", AdminAddr: "127.0.0.1:8379"}
	if w := exposureWarnings(&local); len(w) != 0 {
		t.Fatalf("loopback ports warned: %q", w)
	}
	all := server.Config{ClientAddr: "0.0.0.0:6379", TLSClientAddr: "10.0.0.1:6380", PeerAddr: "10.0.0.1:7379", AdminAddr: ":8379"}
	w := exposureWarnings(&all)
	for _, want := range []string{"plain-text client port 0.0.0.0:6379", "TLS client port 10.0.0.1:6380", "peer port 10.0.0.1:7379", "admin port :8379"} {
		if !strings.Contains(strings.Join(w, "\n"), want) {
			t.Errorf("no warning about the %s in %q", want, w)
		}
	}
	safe := server.Config{ClientAddr: "-", TLSClientAddr: "10.0.0.1:6380", TLSCAFile: "ca.crt", PeerAddr: "10.0.0.1:7379",
		AdminAddr: "10.0.0.1:8379", AdminToken: "t"}
	safe.PeerTLS.CertFile, safe.PeerTLS.KeyFile, safe.PeerTLS.CAFile = "c", "k", "ca"
	if w := exposureWarnings(&safe); len(w) != 0 {
		t.Fatalf("protected ports warned: %q", w)
	}
	safe.TLSAuthClients = "optional"
	if w := exposureWarnings(&safe); len(w) != 1 || !strings.Contains(w[0], "asks no client certificate") {
		t.Fatalf("tls-auth-clients optional: %q", w)
	}
}
