package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/kvorum/kvorum/internal/acl"
	"github.com/kvorum/kvorum/internal/devca"
	"github.com/kvorum/kvorum/internal/server"
)

const (
	demoMaxNodes      = 9
	demoPeerOffset    = 1000
	demoAdminOffset   = 2000
	demoTLSOffset     = 3000 // --tls: the TLS client ports
	demoLeaderTimeout = 30 * time.Second
)

var demoHelp = helpText{
	usage: `kvorum demo [--nodes N] [--port PORT] [--data-dir DIR] [--tls] [--peer-tls] [--requirepass PW] [--secure]`,
	description: `
Runs a complete N-node cluster inside this one process, on 127.0.0.1, for
trying kvorum out. Node i (1..N) listens on:

  client (Redis protocol)   PORT + i - 1          (6379, 6380, ...)
  peer (Raft)               PORT + 1000 + i - 1   (7379, 7380, ...)
  admin HTTP                PORT + 2000 + i - 1   (8379, 8380, ...)
  client over TLS (--tls)   PORT + 3000 + i - 1   (9379, 9380, ...)

It waits for a leader, prints how to connect, and runs until Ctrl-C (or
SIGTERM), then stops every node cleanly. Without --data-dir the data lives in
a temporary directory removed on exit; with --data-dir DIR node i keeps its
data in DIR/node-i, and running the demo again with the same --data-dir (and
--nodes) resumes that cluster. With --tls a throwaway CA and a certificate
for 127.0.0.1 are made anew in the data directory's tls/ on every run, and
each node also serves clients over TLS. With --peer-tls the nodes talk to
each other over mutual TLS, with certificates of a throwaway CA made for the
run (in DIR/peer-tls; what 'kvorum start --peer-cert-file ...' does with yours).
With --requirepass clients must AUTH with that password (the default user's).
--secure is all of it: clients over TLS only (the plain-text ports are off),
mutual TLS between the nodes, a password (--requirepass, or one made for the
run and printed) and an admin token (in DIR/admin.token); it prints how to
connect.`,
	groups: []flagGroup{{"Flags", []string{"nodes", "port", "data-dir", "tls", "peer-tls", "requirepass", "secure", "log-level", "log-format"}}},
	footer: `
Examples:
  kvorum demo
  kvorum demo --nodes 5 --port 16379 --data-dir ./demo-data
  redis-cli -p 6379 SET hello world
  kvorum demo --tls --data-dir ./demo-data
  redis-cli --tls --cacert ./demo-data/tls/ca.crt -p 9379 GET hello
  kvorum demo --secure --data-dir ./demo-data
  kvorum ctl --addr 127.0.0.1:8379 member list`,
}

type demoFlags struct {
	fs        *flag.FlagSet
	nodes     int
	port      int
	dataDir   string
	peerTLS   bool
	tls       bool
	secure    bool
	password  string
	logLevel  string
	logFormat string
}

func newDemoFlags() *demoFlags {
	f := &demoFlags{fs: flag.NewFlagSet("demo", flag.ContinueOnError)}
	f.fs.IntVar(&f.nodes, "nodes", 3, fmt.Sprintf("number of nodes (`N`), 1 to %d", demoMaxNodes))
	f.fs.IntVar(&f.port, "port", 6379, "first client `PORT`; peer ports start at PORT+1000, admin ports at PORT+2000")
	f.fs.StringVar(&f.dataDir, "data-dir", "", "keep node data in `DIR`/node-1, DIR/node-2, ... and reuse it on the next run\n(default: a temporary directory, removed on exit)")
	f.fs.BoolVar(&f.tls, "tls", false, "also serve clients over TLS on PORT+3000.., with a CA and certificate made in\nthe data directory's tls/ (a convenience for trying TLS clients: not for production)")
	f.fs.BoolVar(&f.peerTLS, "peer-tls", false, "mutual TLS between the nodes, with certificates of a throwaway CA made for\nthe run (in DIR/peer-tls)")
	f.fs.StringVar(&f.password, "requirepass", "", "`PASSWORD` clients must AUTH with (the default user's; see kvorum start --requirepass)")
	f.fs.BoolVar(&f.secure, "secure", false, "TLS-only client ports, peer mutual TLS, a password (--requirepass, or one made\nfor the run) and an admin token in DIR/admin.token")
	f.fs.StringVar(&f.logLevel, "log-level", "warn", "`LEVEL` of node logs written to stderr: debug, info, warn or error")
	f.fs.StringVar(&f.logFormat, "log-format", "text", "`FORMAT` of logs: text or json")
	return f
}

func parseDemo(args []string, stdout io.Writer) (*demoFlags, error) {
	f := newDemoFlags()
	if err := parseFlags("demo", f.fs, demoHelp, args, stdout); err != nil {
		return nil, err
	}
	bad := func(format string, a ...any) error { return usageErrorf("demo", format, a...) }
	if f.secure {
		f.tls, f.peerTLS = true, true
	}
	if f.fs.NArg() > 0 {
		return nil, bad("unexpected argument %q", f.fs.Arg(0))
	}
	if f.nodes < 1 || f.nodes > demoMaxNodes {
		return nil, bad("--nodes must be between 1 and %d (got %d)", demoMaxNodes, f.nodes)
	}
	top, what := demoAdminOffset, "admin"
	if f.tls {
		top, what = demoTLSOffset, "TLS"
	}
	if maxPort := 65535 - top - (f.nodes - 1); f.port < 1 || f.port > maxPort {
		return nil, bad("--port must be between 1 and %d for %d nodes, so that %s ports PORT+%d.. stay below 65536 (got %d)",
			maxPort, f.nodes, what, top, f.port)
	}
	if _, err := newLogger(io.Discard, f.logLevel, f.logFormat); err != nil {
		return nil, bad("%v", err)
	}
	return f, nil
}

// demoNodeConfigs returns the configs of the demo's nodes (Logger unset).
func demoNodeConfigs(nodes, port int, dataDir string) []server.Config {
	cluster := map[uint64]string{}
	for i := 1; i <= nodes; i++ {
		cluster[uint64(i)] = demoAddr(port + demoPeerOffset + i - 1)
	}
	cfgs := make([]server.Config, nodes)
	for i := 1; i <= nodes; i++ {
		cfgs[i-1] = server.Config{
			ID:             uint64(i),
			DataDir:        filepath.Join(dataDir, fmt.Sprintf("node-%d", i)),
			ClientAddr:     demoAddr(port + i - 1),
			PeerAddr:       demoAddr(port + demoPeerOffset + i - 1),
			AdminAddr:      demoAddr(port + demoAdminOffset + i - 1),
			InitialCluster: cluster,
			LeaseReads:     true, // as 'kvorum start' has it by default
		}
	}
	return cfgs
}

// demoTLS gives each node a TLS client port with a certificate for
// 127.0.0.1 signed by a throwaway CA, made anew in dir/tls on every run
// (so that a stale one is never served). It returns the CA's file.
func demoTLS(cfgs []server.Config, port int, dir string) (string, error) {
	tdir := filepath.Join(dir, "tls")
	caFile, cert, key := filepath.Join(tdir, "ca.crt"), filepath.Join(tdir, "server.crt"), filepath.Join(tdir, "server.key")
	if err := os.MkdirAll(tdir, 0o700); err != nil {
		return "", fmt.Errorf("--tls: %w", err)
	}
	ca, err := devca.New("kvorum demo CA")
	if err != nil {
		return "", fmt.Errorf("--tls: making a CA: %w", err)
	}
	leaf, err := ca.Server("kvorum demo")
	if err == nil {
		err = ca.WriteCA(caFile)
	}
	if err == nil {
		err = leaf.Write(cert, key)
	}
	if err != nil {
		return "", fmt.Errorf("--tls: making a certificate: %w", err)
	}
	for i := range cfgs {
		cfgs[i].TLSClientAddr = demoAddr(port + demoTLSOffset + i)
		cfgs[i].TLSCertFile, cfgs[i].TLSKeyFile = cert, key
	}
	return caFile, nil
}

func demoAddr(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }

// checkDemoDir makes sure an existing --data-dir holds a demo cluster of
// the same size (or nothing).
func checkDemoDir(dir string, nodes int) (resumed bool, err error) {
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !fi.IsDir() {
		return false, fmt.Errorf("--data-dir %s exists and is not a directory", dir)
	}
	found, _ := filepath.Glob(filepath.Join(dir, "node-*"))
	if len(found) == 0 {
		return false, nil
	}
	if len(found) != nodes {
		return false, fmt.Errorf("--data-dir %s holds a %d-node demo cluster; run with --nodes %d, or use another --data-dir", dir, len(found), len(found))
	}
	for i := 1; i <= nodes; i++ {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("node-%d", i))); err != nil {
			return false, fmt.Errorf("--data-dir %s does not look like a %d-node demo cluster (node-%d missing)", dir, nodes, i)
		}
	}
	return true, nil
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	f, err := parseDemo(args, stdout)
	if err != nil {
		return err
	}
	log, _ := newLogger(stderr, f.logLevel, f.logFormat)

	dir, resumed := f.dataDir, false
	if dir == "" {
		if dir, err = os.MkdirTemp("", "kvorum-demo-*"); err != nil {
			return fmt.Errorf("creating a temporary data directory: %w", err)
		}
		defer func() {
			if rerr := os.RemoveAll(dir); rerr != nil && err == nil {
				err = fmt.Errorf("removing %s: %w", dir, rerr)
			}
		}()
	} else {
		if resumed, err = checkDemoDir(dir, f.nodes); err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating --data-dir: %w", err)
		}
	}

	cfgs := demoNodeConfigs(f.nodes, f.port, dir)
	tlsNote := ""
	if f.peerTLS {
		tlsDir, err := demoPeerTLS(dir, cfgs)
		if err != nil {
			return fmt.Errorf("making the demo's peer TLS certificates: %w", err)
		}
		tlsNote = fmt.Sprintf("peer TLS: mutual, certificates of a throwaway CA in %s\n", tlsDir)
	}
	var caFile string
	if f.tls {
		if caFile, err = demoTLS(cfgs, f.port, dir); err != nil {
			return err
		}
	}
	secNote, err := demoSecure(f, cfgs, dir)
	if err != nil {
		return err
	}
	tlsNote += secNote
	nodes := make([]*server.Node, 0, f.nodes)
	defer func() {
		if len(nodes) > 0 {
			fmt.Fprintf(stdout, "stopping %d node(s)...\n", len(nodes))
			if serr := stopAll(nodes); serr != nil && err == nil {
				err = serr
			}
			fmt.Fprintln(stdout, "stopped")
		}
	}()
	for i := range cfgs {
		cfgs[i].Logger = log.With("node", cfgs[i].ID)
		n, err := server.Start(cfgs[i])
		if err != nil {
			err = fmt.Errorf("starting node %d: %w", cfgs[i].ID, err)
			if errors.Is(err, syscall.EADDRINUSE) {
				err = fmt.Errorf("%w\n(a port is in use: is another kvorum or redis running? pick other ports with --port)", err)
			}
			return err
		}
		nodes = append(nodes, n)
	}

	where := dir + " (temporary, removed on exit)"
	if f.dataDir != "" {
		where = dir
		if resumed {
			where += " (resumed)"
		}
	}
	fmt.Fprintf(stdout, "kvorum demo: %d node(s), data in %s\n%s\n", len(nodes), where, tlsNote)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tCLIENT (RESP)\tPEER (RAFT)\tADMIN (HTTP)")
	for _, n := range nodes {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", n.ID(), n.ClientAddr(), n.PeerAddr(), n.AdminAddr())
	}
	tw.Flush()

	fmt.Fprint(stdout, "\nwaiting for a leader ")
	start := time.Now()
	if err := waitLeaders(ctx, nodes, demoLeaderTimeout, stdout); err != nil {
		fmt.Fprintln(stdout)
		if ctx.Err() != nil {
			return nil // interrupted: stop quietly
		}
		return fmt.Errorf("no leader after %v: %w", demoLeaderTimeout.Round(time.Second), err)
	}
	fmt.Fprintf(stdout, " elected in %v\n\n", time.Since(start).Round(10*time.Millisecond))

	leader := currentLeader(nodes)
	auth := ""
	if f.password != "" {
		auth = " --user default --pass " + f.password
	}
	for _, n := range nodes {
		mark := ""
		if n.ID() == leader {
			mark = "(leader)"
		}
		if n.ClientAddr() != "-" {
			fmt.Fprintln(stdout, strings.TrimRight(fmt.Sprintf("node %d  redis-cli%s -p %-5s  %s", n.ID(), auth, portOf(n.ClientAddr()), mark), " "))
		}
	}
	if caFile != "" {
		fmt.Fprintln(stdout, "\nover TLS:")
		for _, n := range nodes {
			mark := ""
			if n.ID() == leader {
				mark = "  (leader)"
			}
			fmt.Fprintf(stdout, "node %d  redis-cli --tls --cacert %s%s -p %s%s\n", n.ID(), caFile, auth, portOf(n.TLSClientAddr()), mark)
		}
	}
	token := ""
	if f.secure {
		token = " --token-file " + filepath.Join(dir, "admin.token")
	}
	var sentinels []string
	for _, n := range nodes {
		if n.ClientAddr() != "-" {
			sentinels = append(sentinels, n.ClientAddr())
		}
	}
	if len(sentinels) > 0 {
		// Every node answers Redis Sentinel's discovery commands.
		fmt.Fprintf(stdout, "\nSentinel clients: master name %q, sentinels %s\n", server.DefaultSentinelMaster, strings.Join(sentinels, ","))
	}
	fmt.Fprintf(stdout, "\ncluster status:  kvorum ctl --addr %s%s status\n", nodes[0].AdminAddr(), token)
	fmt.Fprintln(stdout, "press Ctrl-C to stop")

	watchLeader(ctx, nodes, leader, stdout)
	return nil
}

// waitLeaders waits until every node knows a leader, printing a dot every
// half second.
func waitLeaders(ctx context.Context, nodes []*server.Node, timeout time.Duration, progress io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	errs := make(chan error, len(nodes))
	for _, n := range nodes {
		go func() {
			if err := n.WaitLeader(ctx); err != nil {
				errs <- fmt.Errorf("node %d: %w", n.ID(), err)
				return
			}
			errs <- nil
		}()
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for pending := len(nodes); pending > 0; {
		select {
		case err := <-errs:
			if err != nil {
				return err
			}
			pending--
		case <-tick.C:
			fmt.Fprint(progress, ".")
		}
	}
	return nil
}

// currentLeader is the leader most nodes report (0 if none).
func currentLeader(nodes []*server.Node) uint64 {
	votes := map[uint64]int{}
	var best uint64
	for _, n := range nodes {
		if l := n.Status().Leader; l != 0 {
			votes[l]++
			if votes[l] > votes[best] {
				best = l
			}
		}
	}
	return best
}

// watchLeader prints leadership changes until ctx is done.
func watchLeader(ctx context.Context, nodes []*server.Node, leader uint64, w io.Writer) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			l := currentLeader(nodes)
			if l == leader {
				continue
			}
			switch {
			case l == 0:
				fmt.Fprintf(w, "%s  leader lost (node %d), election in progress\n", time.Now().Format("15:04:05"), leader)
			default:
				fmt.Fprintf(w, "%s  node %d is now the leader\n", time.Now().Format("15:04:05"), l)
			}
			leader = l
		}
	}
}

func portOf(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return port
}

// stopAll stops the nodes concurrently and returns the first error.
func stopAll(nodes []*server.Node) error {
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.Stop(); err != nil {
				errs[i] = fmt.Errorf("stopping node %d: %w", n.ID(), err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// demoSecure applies --requirepass and --secure to the nodes' configs: the
// password (one made for the run if --secure has none), and with --secure
// no plain-text client port and an admin token written to dir/admin.token.
// It returns a note for the banner.
func demoSecure(f *demoFlags, cfgs []server.Config, dir string) (string, error) {
	if f.secure && f.password == "" {
		p, err := acl.GenPass(128)
		if err != nil {
			return "", err
		}
		f.password = p
	}
	note := ""
	if f.password != "" {
		note = "password (the default user's): " + f.password + "\n"
	}
	var token string
	if f.secure {
		t, err := acl.GenPass(256)
		if err != nil {
			return "", err
		}
		token = t
		file := filepath.Join(dir, "admin.token")
		if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
			return "", fmt.Errorf("--secure: writing the admin token: %w", err)
		}
		note += "admin token: in " + file + "\nplain-text client ports: off (TLS only)\n"
	}
	for i := range cfgs {
		cfgs[i].RequirePass = f.password
		if f.secure {
			cfgs[i].ClientAddr = "-"
			cfgs[i].AdminToken = token
		}
	}
	return note, nil
}
