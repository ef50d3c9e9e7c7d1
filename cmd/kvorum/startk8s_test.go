package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNameOrdinal(t *testing.T) {
	for name, want := range map[string]int{
		"kvorum-0": 0, "kvorum-2": 2, "my-kvorum-13": 13, "kvorum-3.kvorum.ns.svc.cluster.local": 3,
	} {
		if got, err := nameOrdinal(name); err != nil || got != want {
			t.Errorf("nameOrdinal(%q) = %d, %v; want %d", name, got, err, want)
		}
	}
	for _, bad := range []string{"", "kvorum", "kvorum-", "kvorum-x", "kvorum-01", "kvorum-3x", "-", "kvorum.ns-1", "kvorum-99999999999"} {
		if got, err := nameOrdinal(bad); err == nil {
			t.Errorf("nameOrdinal(%q) = %d, want an error", bad, got)
		}
	}
}

// statefulSetArgs is deploy/kubernetes's command line for the pod named
// pod, as Kubernetes expands it.
func statefulSetArgs(pod string, extra ...string) []string {
	fqdn := func(p string) string { return p + ".kvorum.ns.svc.cluster.local" }
	return append([]string{
		"--id-from-name", pod, "--join-from-ordinal", "3",
		"--initial-cluster", "1=" + fqdn("kvorum-0") + ":7379,2=" + fqdn("kvorum-1") + ":7379,3=" + fqdn("kvorum-2") + ":7379",
		"--join", "kvorum-client.ns.svc.cluster.local:7379",
		"--data-dir", "/data", "--peer-addr", "0.0.0.0:7379", "--advertise-peer-addr", fqdn(pod) + ":7379",
		"--client-addr", "0.0.0.0:6379", "--admin-addr", "0.0.0.0:8379",
	}, extra...)
}

func TestStartIDFromName(t *testing.T) {
	for _, c := range []struct {
		pod     string
		id      uint64
		founder bool
	}{{"kvorum-0", 1, true}, {"kvorum-1", 2, true}, {"kvorum-2", 3, true}, {"kvorum-3", 4, false}, {"kvorum-7", 8, false}} {
		f, err := parseStart(statefulSetArgs(c.pod), nil)
		if err != nil {
			t.Errorf("%s: %v", c.pod, err)
			continue
		}
		cfg := f.cfg
		if cfg.ID != c.id {
			t.Errorf("%s: id %d, want %d", c.pod, cfg.ID, c.id)
		}
		if c.founder && (len(cfg.InitialCluster) != 3 || cfg.Join != "") {
			t.Errorf("%s: founder with initial cluster %v, join %q", c.pod, cfg.InitialCluster, cfg.Join)
		}
		if !c.founder && (cfg.InitialCluster != nil || cfg.Join != "kvorum-client.ns.svc.cluster.local:7379") {
			t.Errorf("%s: joiner with initial cluster %v, join %q", c.pod, cfg.InitialCluster, cfg.Join)
		}
		if want := c.pod + ".kvorum.ns.svc.cluster.local:7379"; cfg.AdvertisePeerAddr != want || cfg.PeerAddr != "0.0.0.0:7379" {
			t.Errorf("%s: peer %s advertised %s", c.pod, cfg.PeerAddr, cfg.AdvertisePeerAddr)
		}
	}

	// Without the rule the name only gives the id.
	f, err := parseStart([]string{"--data-dir", "/d", "--id-from-name", "db-4", "--join", "h:7379", "--advertise-peer-addr", "db-4:7379"}, nil)
	if err != nil || f.cfg.ID != 5 || f.cfg.Join != "h:7379" {
		t.Errorf("--id-from-name alone: %v, id %d, join %q", err, f.cfg.ID, f.cfg.Join)
	}
}

func TestStartIDFromNameErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--data-dir", "d", "--id-from-name", "kvorum"}, `--id-from-name: "kvorum" does not end in -ORDINAL`},
		{[]string{"--data-dir", "d", "--id-from-name", "kvorum-1", "--id", "2"}, "--id and --id-from-name exclude each other"},
		{[]string{"--data-dir", "d", "--join-from-ordinal", "3", "--id", "2"}, "--join-from-ordinal needs --id-from-name"},
		{[]string{"--data-dir", "d", "--id-from-name", "kvorum-1", "--join-from-ordinal", "-1"}, "--join-from-ordinal -1"},
		{[]string{"--data-dir", "d", "--id-from-name", "kvorum-3", "--join-from-ordinal", "3", "--initial-cluster", "1=a:1"}, "this node joins: --join is required"},
		{[]string{"--data-dir", "d", "--id-from-name", "kvorum-1", "--join-from-ordinal", "3", "--join", "a:1"}, "founds the cluster: --initial-cluster is required"},
		// Ordinal 3 below --join-from-ordinal 4: a founder, but not listed.
		{statefulSetArgs("kvorum-3", "--join-from-ordinal", "4"), "does not list this node's id 4"},
		// Without the rule both flags exclude each other, as before.
		{[]string{"--data-dir", "d", "--id-from-name", "kvorum-0", "--initial-cluster", "1=a:1", "--join", "b:1"}, "mutually exclusive"},
	} {
		_, err := parseStart(c.args, nil)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.msg)
		}
		if _, ok := err.(*usageError); err != nil && !ok {
			t.Errorf("%v: %T is not a usage error", c.args, err)
		}
	}
}

// --validate-config checks and exits: no data directory is created, no
// port bound (one already in use does not matter), no peer dialed (the
// names do not resolve here).
func TestStartValidateConfig(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for pod, want := range map[string]string{
		"kvorum-0": "configuration OK: ordinal 0: node 1 founds a cluster of 3 (nodes 1, 2, 3) if " + dataDir + " is empty; client " + busy.Addr().String() + "; peer 0.0.0.0:7379 (advertised kvorum-0.kvorum.ns.svc.cluster.local:7379); admin 0.0.0.0:8379\n",
		"kvorum-3": "configuration OK: ordinal 3: node 4 joins through kvorum-client.ns.svc.cluster.local:7379 if " + dataDir + " is empty;",
	} {
		code, out, errOut := runCmd(append([]string{"start"}, statefulSetArgs(pod, "--data-dir", dataDir, "--client-addr", busy.Addr().String(), "--validate-config")...)...)
		if code != 0 || errOut != "" || !strings.HasPrefix(out, "kvorum start: ") || !strings.Contains(out, want) || strings.Count(out, "\n") != 1 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want %q", pod, code, out, errOut, want)
		}
	}
	if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
		t.Errorf("--validate-config touched the data directory: %v", err)
	}
	code, out, _ := runCmd("start", "--data-dir", dataDir, "--validate-config")
	if code != 0 || !strings.Contains(out, "restarts the node in "+dataDir) {
		t.Errorf("restart: exit %d, %q", code, out)
	}

	// The files a start reads are read, and their errors are a start's.
	ca, caFile, cert, key := testCerts(t, dir)
	node, err := ca.Issue("node-1")
	if err != nil {
		t.Fatal(err)
	}
	nodeCert, nodeKey := filepath.Join(dir, "node.crt"), filepath.Join(dir, "node.key")
	if err := node.Write(nodeCert, nodeKey); err != nil {
		t.Fatal(err)
	}
	token := writeFile(t, filepath.Join(dir, "token"), "t0ken\n")
	aclFile := writeFile(t, filepath.Join(dir, "users.acl"), "user default on nopass ~* &* +@all\n")
	badACL := writeFile(t, filepath.Join(dir, "bad.acl"), "user alice on +nosuchcommand\n")
	notDir := writeFile(t, filepath.Join(dir, "file"), "")
	base := []string{"start", "--id", "1", "--data-dir", dataDir, "--validate-config"}
	ok := [][]string{
		{"--tls-port", "6390", "--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", caFile},
		{"--peer-cert-file", nodeCert, "--peer-key-file", nodeKey, "--peer-trusted-ca-file", caFile},
		{"--admin-token-file", token, "--admin-tls-cert-file", cert, "--admin-tls-key-file", key},
		{"--aclfile", aclFile},
	}
	for _, args := range ok {
		if code, out, errOut := runCmd(append(base, args...)...); code != 0 || !strings.Contains(out, "configuration OK") {
			t.Errorf("%v: exit %d, %q %q", args, code, out, errOut)
		}
	}
	missing := filepath.Join(dir, "missing.crt")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--tls-port", "6390", "--tls-cert-file", missing, "--tls-key-file", key}, exitError, "--tls-cert-file"},
		{[]string{"--peer-cert-file", nodeCert, "--peer-key-file", nodeKey, "--peer-trusted-ca-file", missing}, exitError, "missing.crt"},
		{[]string{"--peer-cert-file", cert, "--peer-key-file", key, "--peer-trusted-ca-file", caFile}, exitError, "incompatible key usage"},
		{[]string{"--admin-tls-cert-file", key, "--admin-tls-key-file", key}, exitError, "--admin-tls-cert-file"},
		{[]string{"--admin-token-file", missing}, exitUsage, "--admin-token-file"},
		{[]string{"--aclfile", missing}, exitError, "--aclfile"},
		{[]string{"--aclfile", badACL}, exitError, "--aclfile " + badACL},
		{[]string{"--data-dir", notDir}, exitError, "not a directory"},
		{[]string{"--initial-cluster", "2=a:1"}, exitUsage, "does not list this node's id 1"},
		{[]string{"--peer-addr", "0.0.0.0:7379", "--advertise-peer-addr", "0.0.0.0:7379"}, exitUsage, "--advertise-peer-addr"},
		{[]string{"--no-such-flag"}, exitUsage, "--no-such-flag"},
	} {
		code, out, errOut := runCmd(append(base, c.args...)...)
		if code != c.code || out != "" || !strings.Contains(errOut, c.msg) {
			t.Errorf("%v: exit %d (want %d), stdout %q, stderr %q (want %q)", c.args, code, c.code, out, errOut, c.msg)
		}
	}
	if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
		t.Errorf("--validate-config touched the data directory: %v", err)
	}
}
