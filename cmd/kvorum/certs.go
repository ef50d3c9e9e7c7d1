package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/kvorum/kvorum/internal/devca"
)

// kvorum certs: a CA and the certificates of a cluster, for trying TLS
// (the demo, a compose cluster) without openssl.

var certsHelp = helpText{
	usage: `kvorum certs --out DIR [--nodes N] [--hosts H1,H2,...] [--force]`,
	description: `Makes a throwaway certificate authority and what a cluster of N nodes needs
to run with TLS everywhere, in DIR:

  ca.crt                the CA certificate: --peer-trusted-ca-file, --tls-ca-cert-file,
                        --admin-tls-ca-cert-file, and redis-cli --cacert / kvorum ctl --cacert
  node-I.crt, node-I.key  node I's certificate and key (server and client use: the
                        peer port's mutual TLS, the TLS client port, the admin HTTPS port)
  client.crt, client.key  a client certificate (--tls-auth-clients yes; kvorum ctl --cert)
  admin.token           a random admin token (--admin-token-file; kvorum ctl --token-file)

The certificates name 127.0.0.1, ::1, localhost and every --hosts entry (IP
addresses or DNS names, e.g. the compose services kvorum-1,kvorum-2,kvorum-3),
and are valid for a year. The CA's key is not kept: run again (with --force)
to issue certificates for more nodes or hosts. Keys are written readable by
their owner only. For production, use your own CA.`,
	groups: []flagGroup{{"Flags", []string{"out", "nodes", "hosts", "force"}}},
}

type certsFlags struct {
	fs    *flag.FlagSet
	out   string
	nodes int
	hosts string
	force bool
}

func newCertsFlags() *certsFlags {
	f := &certsFlags{fs: flag.NewFlagSet("certs", flag.ContinueOnError)}
	f.fs.StringVar(&f.out, "out", "", "write the files into `DIR` (created if missing)")
	f.fs.IntVar(&f.nodes, "nodes", 3, "make certificates for nodes 1 to `N`")
	f.fs.StringVar(&f.hosts, "hosts", "", "comma-separated extra host names or IP addresses the certificates name")
	f.fs.BoolVar(&f.force, "force", false, "replace files DIR already holds")
	return f
}

func runCerts(_ context.Context, args []string, stdout, _ io.Writer) error {
	f := newCertsFlags()
	if err := parseFlags("certs", f.fs, certsHelp, args, stdout); err != nil {
		return err
	}
	bad := func(format string, a ...any) error { return usageErrorf("certs", format, a...) }
	switch {
	case f.fs.NArg() > 0:
		return bad("unexpected argument %q", f.fs.Arg(0))
	case f.out == "":
		return bad("--out DIR is required")
	case f.nodes < 1 || f.nodes > 100:
		return bad("--nodes must be between 1 and 100 (got %d)", f.nodes)
	}
	var hosts []string
	for _, h := range strings.Split(f.hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	names := []string{"ca.crt", "client.crt", "client.key", "admin.token"}
	for i := 1; i <= f.nodes; i++ {
		names = append(names, fmt.Sprintf("node-%d.crt", i), fmt.Sprintf("node-%d.key", i))
	}
	if !f.force {
		for _, n := range names {
			if _, err := os.Stat(filepath.Join(f.out, n)); err == nil {
				return fmt.Errorf("%s already exists: pass --force to replace the files in %s", filepath.Join(f.out, n), f.out)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	ca, err := devca.New("kvorum cluster CA")
	if err != nil {
		return err
	}
	for i := 1; i <= f.nodes; i++ {
		name := fmt.Sprintf("node-%d", i)
		cert, err := ca.Issue(name, hosts...)
		if err != nil {
			return err
		}
		if _, err := ca.WriteFiles(f.out, name, cert); err != nil {
			return err
		}
	}
	client, err := ca.Client("kvorum client")
	if err != nil {
		return err
	}
	if err := client.Write(filepath.Join(f.out, "client.crt"), filepath.Join(f.out, "client.key")); err != nil {
		return err
	}
	tok := make([]byte, 32)
	if _, err := rand.Read(tok); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(f.out, "admin.token"), []byte(hex.EncodeToString(tok)+"\n"), 0o600); err != nil {
		return err
	}
	d := f.out
	fmt.Fprintf(stdout, "wrote a CA, %d node certificate(s), a client certificate and an admin token to %s\n\n", f.nodes, d)
	fmt.Fprintf(stdout, "node I (I = 1..%d) runs with:\n", f.nodes)
	fmt.Fprintf(stdout, "  kvorum start ... \\\n")
	fmt.Fprintf(stdout, "    --peer-cert-file %s --peer-key-file %s --peer-trusted-ca-file %s \\\n",
		filepath.Join(d, "node-I.crt"), filepath.Join(d, "node-I.key"), filepath.Join(d, "ca.crt"))
	fmt.Fprintf(stdout, "    --tls-port PORT --tls-cert-file %s --tls-key-file %s \\\n", filepath.Join(d, "node-I.crt"), filepath.Join(d, "node-I.key"))
	fmt.Fprintf(stdout, "    --admin-token-file %s --admin-tls-cert-file %s --admin-tls-key-file %s\n",
		filepath.Join(d, "admin.token"), filepath.Join(d, "node-I.crt"), filepath.Join(d, "node-I.key"))
	fmt.Fprintf(stdout, "clients:\n  redis-cli --tls --cacert %s -p PORT ping\n", filepath.Join(d, "ca.crt"))
	fmt.Fprintf(stdout, "  kvorum ctl --addr HOST:ADMINPORT --cacert %s --token-file %s status\n", filepath.Join(d, "ca.crt"), filepath.Join(d, "admin.token"))
	return nil
}
