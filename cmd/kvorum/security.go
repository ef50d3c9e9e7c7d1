package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kvorum/kvorum/internal/server"
	"github.com/kvorum/kvorum/internal/tlsconf"
)

// The security flags of `kvorum start`: TLS on the client port (under
// Redis's names), and the admin port's token, HTTPS and profiler. Kept
// here, apart from start.go, so that they read as one group.

var securityFlagGroups = []flagGroup{
	{"Authentication (Redis's names; the users are cluster state once changed with ACL SETUSER)", []string{
		"requirepass", "aclfile"}},
	{"Client TLS (Redis's names; certificate files are re-read when they change)", []string{
		"port", "tls-port", "tls-cert-file", "tls-key-file", "tls-ca-cert-file", "tls-auth-clients"}},
	{"Admin HTTP security", []string{
		"admin-token-file", "admin-tls-cert-file", "admin-tls-key-file", "admin-tls-ca-cert-file", "pprof"}},
}

type securityFlags struct {
	port           string
	tlsPort        int
	adminTokenFile string
}

func addSecurityFlags(fs *flag.FlagSet, s *securityFlags, c *server.Config) {
	fs.StringVar(&s.port, "port", "", "the plain-text client `PORT`, as Redis's port: replaces the port of --client-addr;\n0 switches the plain-text port off (then --tls-port is the only client port)\n(default: the port of --client-addr)")
	fs.StringVar(&c.RequirePass, "requirepass", "", "`PASSWORD` of the default user: clients must AUTH (as Redis's requirepass;\nignored with --aclfile). Start every node with the same one: the users are\ncluster state, and the first ACL change replaces every node's flags")
	fs.StringVar(&c.ACLFile, "aclfile", "", "`FILE` of ACL users, Redis's format ('user alice on >pw ~app:* +@read'): the\nusers the cluster starts with, what ACL LOAD reads and ACL SAVE writes;\nit must exist and load")
	fs.IntVar(&s.tlsPort, "tls-port", 0, "`PORT` of a second client listener that speaks TLS, on --client-addr's host;\nneeds --tls-cert-file and --tls-key-file; 0: none")
	fs.StringVar(&c.TLSCertFile, "tls-cert-file", "", "`FILE` with the client port's PEM certificate (chain)")
	fs.StringVar(&c.TLSKeyFile, "tls-key-file", "", "`FILE` with the PEM private key of --tls-cert-file")
	fs.StringVar(&c.TLSCAFile, "tls-ca-cert-file", "", "`FILE` of PEM CA certificates that client certificates must chain to")
	fs.StringVar(&c.TLSAuthClients, "tls-auth-clients", "", "`MODE`: yes (clients must present a certificate of --tls-ca-cert-file), optional\n(verified if presented) or no (not asked for)\n(default: yes with --tls-ca-cert-file, else no)")
	fs.StringVar(&s.adminTokenFile, "admin-token-file", "", "`FILE` holding a bearer token (read once at start; surrounding whitespace\nignored): every admin path but /healthz and /readyz then needs\n'Authorization: Bearer <token>' (kvorum ctl --token-file) (default: none,\nthe admin API is open to whoever reaches --admin-addr)")
	fs.StringVar(&c.AdminTLSCertFile, "admin-tls-cert-file", "", "`FILE` with a PEM certificate: the admin server speaks HTTPS (with\n--admin-tls-key-file)")
	fs.StringVar(&c.AdminTLSKeyFile, "admin-tls-key-file", "", "`FILE` with the PEM private key of --admin-tls-cert-file")
	fs.StringVar(&c.AdminTLSCAFile, "admin-tls-ca-cert-file", "", "`FILE` of PEM CA certificates: a client certificate they signed is accepted on\nthe admin port instead of the token (without --admin-token-file, required)")
	fs.BoolVar(&c.Pprof, "pprof", false, "serve Go's profiler at /debug/pprof/ on the admin port (behind the token)")
}

// applySecurityFlags checks the security flags and completes c: the
// client addresses and the admin token.
func applySecurityFlags(s *securityFlags, set map[string]bool, c *server.Config) error {
	host, _, err := net.SplitHostPort(c.ClientAddr)
	if err != nil {
		return fmt.Errorf("--client-addr %q is not HOST:PORT", c.ClientAddr)
	}
	if set["port"] {
		p, err := strconv.ParseUint(s.port, 10, 16)
		if err != nil {
			return fmt.Errorf("--port %q: want a port number (0 switches the plain-text port off)", s.port)
		}
		if p == 0 {
			c.ClientAddr = "-"
		} else {
			c.ClientAddr = net.JoinHostPort(host, s.port)
		}
	}
	if s.tlsPort < 0 || s.tlsPort > 65535 {
		return fmt.Errorf("--tls-port %d: want 1-65535 (0: none)", s.tlsPort)
	}
	if s.tlsPort > 0 {
		c.TLSClientAddr = net.JoinHostPort(host, strconv.Itoa(s.tlsPort))
		if c.TLSClientAddr == c.ClientAddr {
			return fmt.Errorf("--tls-port %d is the plain-text port too (pick another, or --port 0 for TLS only)", s.tlsPort)
		}
	}
	if c.TLSAuthClients != "" {
		if _, err := tlsconf.ParseClientAuth(c.TLSAuthClients); err != nil {
			return fmt.Errorf("--tls-auth-clients %v", err)
		}
	}
	if s.adminTokenFile != "" {
		tok, err := readToken(s.adminTokenFile)
		if err != nil {
			return fmt.Errorf("--admin-token-file: %v", err)
		}
		c.AdminToken = tok
	}
	if c.AdminAddr == "-" {
		for _, name := range []string{"admin-token-file", "admin-tls-cert-file", "admin-tls-key-file", "admin-tls-ca-cert-file", "pprof"} {
			if set[name] {
				return fmt.Errorf("--%s has no use with --admin-addr - (the admin server is off)", name)
			}
		}
	}
	// The combinations (--tls-port without a certificate, ...) are checked
	// by the server's own validation, with the same flag names.
	return c.ValidateSecurity()
}

// warnInsecureAdmin logs a warning when the admin token would cross a
// network in clear text (plain HTTP on an address that is not loopback).
func warnInsecureAdmin(log *slog.Logger, c *server.Config) {
	if c.AdminToken == "" || c.AdminTLSCertFile != "" || c.AdminAddr == "-" {
		return
	}
	host, _, err := net.SplitHostPort(c.AdminAddr)
	if err != nil {
		return
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return
	}
	log.Warn("the admin token travels in clear text: the admin port speaks plain HTTP on a non-loopback address (add --admin-tls-cert-file and --admin-tls-key-file)",
		"admin_addr", c.AdminAddr)
}

// exposureWarnings says, for each port bound beyond loopback, what anyone
// who can reach it may do without a credential. kvorum's choice where
// Redis has its protected mode (which refuses non-loopback clients when no
// password is set): the node starts, and says so loudly, once per port.
func exposureWarnings(c *server.Config) []string {
	var w []string
	noPass := c.RequirePass == "" && c.ACLFile == ""
	if c.ClientAddr != "-" && exposed(c.ClientAddr) {
		if noPass {
			w = append(w, "the plain-text client port "+c.ClientAddr+" is reachable beyond this machine without a password (--requirepass or --aclfile): anyone who reaches it can read and write every key; bind it to loopback, set a password, or use --port 0 with --tls-port and --tls-auth-clients yes")
		} else {
			w = append(w, "the plain-text client port "+c.ClientAddr+" is reachable beyond this machine: passwords and data cross the network in clear text; use --port 0 with --tls-port")
		}
	}
	if c.TLSClientAddr != "" && exposed(c.TLSClientAddr) && !clientCertsRequired(c) && noPass {
		w = append(w, "the TLS client port "+c.TLSClientAddr+" is reachable beyond this machine and asks no client certificate (--tls-auth-clients yes with --tls-ca-cert-file requires one) and no password (--requirepass or --aclfile): anyone who reaches it can read and write every key")
	}
	if exposed(c.PeerAddr) && !c.PeerTLS.Enabled() {
		w = append(w, "the peer port "+c.PeerAddr+" is reachable beyond this machine without mutual TLS: anyone who reaches it can send Raft messages and forwarded writes; use --peer-cert-file, --peer-key-file and --peer-trusted-ca-file, or a private network")
	}
	if c.AdminAddr != "-" && exposed(c.AdminAddr) && c.AdminToken == "" && c.AdminTLSCAFile == "" {
		w = append(w, "the admin port "+c.AdminAddr+" is reachable beyond this machine without a token: anyone who reaches it can change the membership and move the leader; use --admin-token-file")
	}
	return w
}

// exposed reports whether addr (host:port) listens beyond loopback (an
// unspecified host listens on every interface).
func exposed(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host != "localhost" && (ip == nil || !ip.IsLoopback())
}

// clientCertsRequired reports whether the TLS client port requires a
// client certificate of the CA.
func clientCertsRequired(c *server.Config) bool {
	if c.TLSAuthClients != "" {
		a, err := tlsconf.ParseClientAuth(c.TLSAuthClients)
		return err == nil && a == tlsconf.AuthYes && c.TLSCAFile != ""
	}
	return c.TLSCAFile != ""
}

// readToken reads a token file: its content without surrounding
// whitespace, which must not be empty or hold a line break.
func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	switch {
	case tok == "":
		return "", fmt.Errorf("%s is empty", path)
	case strings.ContainsAny(tok, "\r\n"):
		return "", fmt.Errorf("%s holds more than one line (want the token alone)", path)
	}
	return tok, nil
}

var errTokenTwice = errors.New("give the token once: --token, --token-file or KVORUM_ADMIN_TOKEN")

// The security flags of `kvorum ctl`. There is deliberately no way to
// skip the verification of the server's certificate: give its CA.

var ctlSecurityGroup = flagGroup{"Authentication and TLS", []string{"token", "token-file", "cacert", "cert", "key"}}

// ctlTokenEnv names the environment variable ctl reads a token from.
const ctlTokenEnv = "KVORUM_ADMIN_TOKEN"

type ctlSecurity struct {
	token, tokenFile string
	caFile           string
	certFile         string
	keyFile          string
}

func addCtlSecurityFlags(fs *flag.FlagSet, s *ctlSecurity) {
	fs.StringVar(&s.token, "token", "", "the admin bearer `TOKEN` (visible to other users in the process list: prefer\n--token-file or "+ctlTokenEnv+") (default: $"+ctlTokenEnv+")")
	fs.StringVar(&s.tokenFile, "token-file", "", "`FILE` holding the admin bearer token (the node's --admin-token-file)")
	fs.StringVar(&s.caFile, "cacert", "", "PEM `FILE` of the CA that signed the admin server's certificate: talk HTTPS and\ntrust it (HOST:PORT in --addr then means https://)")
	fs.StringVar(&s.certFile, "cert", "", "PEM `FILE` with a client certificate for the admin server (with --key)")
	fs.StringVar(&s.keyFile, "key", "", "PEM `FILE` with the private key of --cert")
}

func (s *ctlSecurity) https() bool { return s.caFile != "" || s.certFile != "" }

func (s *ctlSecurity) check(set map[string]bool) error {
	if set["token"] && set["token-file"] {
		return errTokenTwice
	}
	if set["token"] && s.token == "" {
		return errors.New("--token is empty")
	}
	if (s.certFile == "") != (s.keyFile == "") {
		return errors.New("--cert and --key go together")
	}
	return nil
}

// clientTLSConfig is the TLS configuration of a client given --cacert
// (the servers' CA; empty: the system's), --cert and --key (a client
// certificate; empty: none).
func clientTLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := tlsconf.LoadCA(caFile)
		if err != nil {
			return nil, fmt.Errorf("--cacert: %v", err)
		}
		cfg.RootCAs = pool
	}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--cert %s / --key %s: %v", certFile, keyFile, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// client returns the HTTP client and the token to send ("" for none).
func (s *ctlSecurity) client(timeout time.Duration) (*http.Client, string, error) {
	token := s.token
	switch {
	case s.tokenFile != "":
		t, err := readToken(s.tokenFile)
		if err != nil {
			return nil, "", fmt.Errorf("--token-file: %v", err)
		}
		token = t
	case token == "":
		token = strings.TrimSpace(os.Getenv(ctlTokenEnv))
	}
	hc := &http.Client{Timeout: timeout}
	if s.caFile == "" && s.certFile == "" {
		return hc, token, nil
	}
	cfg, err := clientTLSConfig(s.caFile, s.certFile, s.keyFile)
	if err != nil {
		return nil, "", err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	hc.Transport = tr
	return hc, token, nil
}
