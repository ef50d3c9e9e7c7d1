package admin

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kvorum/kvorum/internal/devca"
)

// get fetches url with an optional Authorization header and returns the
// status code and body.
func get(t *testing.T, c *http.Client, url, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}

func TestTokenAuth(t *testing.T) {
	ts := httptest.NewServer(New(Config{Node: newFake(), Token: "s3cret-token"}).Handler())
	defer ts.Close()
	c := ts.Client()
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, _ := get(t, c, ts.URL+p, ""); code != 200 {
			t.Errorf("%s without a token: %d, want 200", p, code)
		}
	}
	for _, p := range []string{"/v1/status", "/v1/members", "/metrics", "/debug/pprof/", "/nope"} {
		for _, auth := range []string{"", "Bearer wrong", "Bearer s3cret-tokenx", "s3cret-token", "Basic s3cret-token"} {
			code, body := get(t, c, ts.URL+p, auth)
			if code != http.StatusUnauthorized || !strings.Contains(body, `"error": "authentication required`) {
				t.Errorf("%s with %q: %d %s, want 401", p, auth, code, body)
			}
		}
	}
	code, body := get(t, c, ts.URL+"/v1/status", "Bearer s3cret-token")
	if code != 200 || !strings.Contains(body, `"node_id": 1`) {
		t.Errorf("status with the token: %d %s", code, body)
	}
	if code, _ := get(t, c, ts.URL+"/metrics", "Bearer s3cret-token"); code != 200 {
		t.Errorf("metrics with the token: %d", code)
	}
	// pprof is off without Config.Pprof, token or not.
	if code, _ := get(t, c, ts.URL+"/debug/pprof/", "Bearer s3cret-token"); code != 404 {
		t.Errorf("pprof without the flag: %d, want 404", code)
	}
	resp, err := c.Get(ts.URL + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("WWW-Authenticate"); got != `Bearer realm="kvorum"` {
		t.Errorf("WWW-Authenticate %q", got)
	}
}

func TestPprofFlag(t *testing.T) {
	off := httptest.NewServer(New(Config{Node: newFake()}).Handler())
	defer off.Close()
	if code, _ := get(t, off.Client(), off.URL+"/debug/pprof/", ""); code != 404 {
		t.Errorf("pprof off: %d, want 404", code)
	}
	// No token configured: the API stays open, as before.
	if code, _ := get(t, off.Client(), off.URL+"/v1/status", ""); code != 200 {
		t.Errorf("status without auth configured: %d", code)
	}
	on := httptest.NewServer(New(Config{Node: newFake(), Pprof: true, Token: "t"}).Handler())
	defer on.Close()
	if code, body := get(t, on.Client(), on.URL+"/debug/pprof/", "Bearer t"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Errorf("pprof on: %d", code)
	}
	if code, _ := get(t, on.Client(), on.URL+"/debug/pprof/", ""); code != 401 {
		t.Errorf("pprof on, no token: %d, want 401", code)
	}
}

func TestClientCertAuth(t *testing.T) {
	ca, err := devca.New("admin-ca")
	if err != nil {
		t.Fatal(err)
	}
	other, err := devca.New("other-ca")
	if err != nil {
		t.Fatal(err)
	}
	srvLeaf, err := ca.Server("admin")
	if err != nil {
		t.Fatal(err)
	}
	srvCert, err := srvLeaf.TLS()
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(New(Config{Node: newFake(), CertAuth: true}).Handler())
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{srvCert}, ClientCAs: ca.Pool(), ClientAuth: tls.VerifyClientCertIfGiven}
	ts.StartTLS()
	defer ts.Close()
	client := func(signer *devca.CA) *http.Client {
		cfg := &tls.Config{RootCAs: ca.Pool()}
		if signer != nil {
			leaf, err := signer.Client("ctl")
			if err != nil {
				t.Fatal(err)
			}
			c, err := leaf.TLS()
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{c}
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	}
	if code, _ := get(t, client(nil), ts.URL+"/healthz", ""); code != 200 {
		t.Errorf("healthz without a certificate: %d", code)
	}
	if code, body := get(t, client(nil), ts.URL+"/v1/status", ""); code != 401 || !strings.Contains(body, "client certificate") {
		t.Errorf("status without a certificate: %d %s", code, body)
	}
	if code, _ := get(t, client(ca), ts.URL+"/v1/status", ""); code != 200 {
		t.Errorf("status with a certificate: %d", code)
	}
	// A certificate from another CA is not admitted (Go's client does not
	// even send it: the server names the CAs it accepts).
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/v1/status", nil)
	if resp, err := client(other).Do(req); err == nil {
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("a certificate of another CA: HTTP %d, want 401 or a failed handshake", resp.StatusCode)
		}
	}
}
