package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kvorum/kvorum/internal/admin"
	"github.com/kvorum/kvorum/internal/server"
	"github.com/kvorum/kvorum/internal/storage"
	"github.com/kvorum/kvorum/internal/store"
)

var startHelp = helpText{
	usage: `
kvorum start --id N --data-dir DIR --initial-cluster 1=HOST:PORT,2=HOST:PORT,... [flags]
kvorum start --id N --data-dir DIR --join HOST:PORT [flags]
kvorum start --id N --data-dir DIR [flags]   (a new single-node cluster)
kvorum start --data-dir DIR [flags]          (restart: identity and cluster are read from DIR)
kvorum start --id-from-name POD --join-from-ordinal 3 --initial-cluster ... --join HOST:PORT --data-dir DIR [flags]
                                             (a StatefulSet pod: deploy/kubernetes)
kvorum start ... --validate-config           (check the command line, start nothing)`,
	description: `
Runs one kvorum node: a Redis-protocol server for clients, a peer server for
Raft traffic between nodes, and an admin HTTP server (/healthz, /readyz,
/metrics and the API 'kvorum ctl' uses). Stops cleanly on SIGINT or SIGTERM;
a leader first hands its leadership to the most up-to-date follower (for at
most two election timeouts), so that writes pause for a few round trips
instead of an election.

To create a cluster, start every node with the same --initial-cluster and its
own --id. To grow a running cluster, start the new node with its --id and
--join pointing at any member's peer address: it is added as a learner, gets
a snapshot and the log tail, and is promoted to voter once caught up. A node
started with neither --initial-cluster nor --join on an empty --data-dir forms
a single-node cluster. A restarted node needs only --data-dir.`,
	groups: []flagGroup{
		{"Node and cluster", []string{"id", "data-dir", "initial-cluster", "join"}},
		{"Listen and advertised addresses", []string{"client-addr", "peer-addr", "admin-addr", "advertise-client-addr", "advertise-peer-addr", "sentinel-master-name"}},
		{"Raft", []string{"tick-interval", "election-ticks", "heartbeat-ticks", "snapshot-threshold"}},
		{"Clients (sizes accept K, M, G suffixes: powers of 1024)", []string{"request-timeout", "max-key-size", "max-value-size", "max-args", "max-frame-size", "max-clients"}},
		{"Storage", []string{"min-free-disk", "cache-size", "memtable-size", "record-cache", "read-cache"}},
		{"Ranges", []string{"range-split-size", "range-split-qps"}},
		{"Logging", []string{"log-level", "log-format"}},
		peerTLSFlagGroup,
		orchestrationFlagGroup,
	},
}

func init() { startHelp.groups = append(startHelp.groups, securityFlagGroups...) }

type startFlags struct {
	fs             *flag.FlagSet
	cfg            server.Config
	initialCluster string
	logLevel       string
	logFormat      string
	minFreeDisk    int
	cacheSize      int
	readCache      int
	memTableSize   int
	rangeSplitSize int
	security       securityFlags
	orch           orchestrationFlags // startk8s.go
}

func newStartFlags() *startFlags {
	f := &startFlags{fs: flag.NewFlagSet("start", flag.ContinueOnError)}
	fs, c := f.fs, &f.cfg
	fs.Uint64Var(&c.ID, "id", 0, "this node's `ID`: a positive integer, unique in the cluster (required on first\nstart; read from --data-dir on restart)")
	fs.StringVar(&c.DataDir, "data-dir", "", "`DIR` holding the node's Raft log and data; created if missing (required)")
	fs.StringVar(&f.initialCluster, "initial-cluster", "", "comma-separated `ID=HOST:PORT` entries: every founding member's id and peer\naddress, identical on all founding nodes; ignored when --data-dir already holds\nstate (default: none; a new node then forms a single-node cluster, or joins\nwith --join)")
	fs.StringVar(&c.Join, "join", "", "peer address (`HOST:PORT`) of any member of a running cluster: a new node\nasks to be added through it, and start returns once it is admitted; excludes\n--initial-cluster (default: none)")
	fs.StringVar(&c.ClientAddr, "client-addr", server.DefaultClientAddr, "`HOST:PORT` to serve Redis-protocol clients on")
	fs.StringVar(&c.PeerAddr, "peer-addr", server.DefaultPeerAddr, "`HOST:PORT` to listen on for other nodes, and (without --advertise-peer-addr)\nthe address they dial; with --initial-cluster, defaults to this node's entry\nthere")
	fs.StringVar(&c.AdvertisePeerAddr, "advertise-peer-addr", "", "`HOST:PORT` the other nodes reach this node's peer port at, when it is not\n--peer-addr (a container: --peer-addr 0.0.0.0:7379 --advertise-peer-addr\nkv1:7379): sent when joining, listed as this node's member address; a host\nname is resolved at every dial, so a node restarted at a new IP under the\nsame name is reached again (default: with --initial-cluster, this node's\nentry there; else --peer-addr)")
	fs.StringVar(&c.AdvertiseClientAddr, "advertise-client-addr", "", "`HOST:PORT` clients reach this node's client port at, when it is not\n--client-addr (a container's published port): reported by 'kvorum ctl\nstatus' (default: --client-addr)")
	fs.StringVar(&c.SentinelMasterName, "sentinel-master-name", server.DefaultSentinelMaster, "`NAME` of the cluster for Redis Sentinel clients: every node answers\nSENTINEL GET-MASTER-ADDR-BY-NAME NAME (and MASTERS, REPLICAS, SENTINELS, ...)\nwith the leader's client address, so a client given the nodes' client\naddresses as its sentinels (go-redis NewFailoverClient, redis-py Sentinel)\nfollows the leader")
	fs.StringVar(&c.AdminAddr, "admin-addr", server.DefaultAdminAddr, "`HOST:PORT` of the admin HTTP server (/metrics, /healthz, /readyz, ctl API);\n\"-\" disables it")
	fs.DurationVar(&c.TickInterval, "tick-interval", server.DefaultTickInterval, "Raft logical clock period (a `DURATION` such as 100ms)")
	fs.IntVar(&c.ElectionTicks, "election-ticks", server.DefaultElectionTicks, "election timeout in ticks (`N`); must exceed --heartbeat-ticks")
	fs.IntVar(&c.HeartbeatTicks, "heartbeat-ticks", server.DefaultHeartbeatTicks, "leader heartbeat interval in ticks (`N`)")
	fs.BoolVar(&c.LeaseReads, "lease-reads", true, "serve reads on the leader from a leader lease, with no Raft round per read;\nassumes the nodes' clocks tick at rates within 10% of each other (wall-clock\njumps do not matter: leases use the monotonic clock); false: every read\nbatch costs a ReadIndex round to a quorum")
	fs.Uint64Var(&c.SnapshotThreshold, "snapshot-threshold", server.DefaultSnapshotThreshold, "truncate the Raft log once `N` applied entries sit in it")
	fs.DurationVar(&c.RequestTimeout, "request-timeout", server.DefaultRequestTimeout, "how long a client command waits for a leader or a commit before it gets an\nerror (`DURATION`)")
	c.MaxKeySize = server.DefaultMaxKeySize
	c.MaxValueSize = server.DefaultMaxValueSize
	c.MaxFrameSize = server.DefaultMaxFrameSize
	fs.Var(sizeValue{&c.MaxKeySize}, "max-key-size", "largest key accepted (`SIZE`)")
	fs.Var(sizeValue{&c.MaxValueSize}, "max-value-size", "largest value accepted (`SIZE`)")
	fs.IntVar(&c.MaxArgs, "max-args", server.DefaultMaxArgs, "most arguments in one command (`N`)")
	fs.Var(sizeValue{&c.MaxFrameSize}, "max-frame-size", "largest command frame accepted (`SIZE`)")
	fs.IntVar(&c.MaxClients, "max-clients", server.DefaultMaxClients, "most simultaneous client connections (`N`)")
	f.minFreeDisk = server.DefaultMinFreeDisk
	fs.Var(sizeValue{&f.minFreeDisk}, "min-free-disk", "refuse writes, with an error, while the data directory's filesystem has less\nthan `SIZE` available (reads keep working; writes resume once space is freed);\n0 disables the check")
	f.cacheSize = storage.DefaultCacheSize
	fs.Var(sizeValue{&f.cacheSize}, "cache-size", "`SIZE` of the block cache: the memory that holds recently read data blocks\n(uncompressed) so that reads and writes of hot keys need no disk read; the\nnode's resident memory is roughly this, plus two memtables (--memtable-size),\nplus the process's own heap (the record cache's share of it: --record-cache)")
	f.memTableSize = storage.DefaultMemTableSize
	fs.Var(sizeValue{&f.memTableSize}, "memtable-size", "`SIZE` of one memtable, the storage engine's write buffer (two exist while one\nis flushed): smaller saves memory for more, smaller flushes and compactions")
	fs.IntVar(&c.RecordCache, "record-cache", server.DefaultRecordCache, "how many keys' metadata records (`N`) the apply path keeps in memory, so that\na write need not look up the record it replaces on disk; about 400 bytes of\nresident memory per key (40 MiB at the default)")
	f.readCache = server.DefaultReadCache
	fs.Var(sizeValue{&f.readCache}, "read-cache", "`SIZE` of the read cache: whole records (values included) of recently read\nkeys, which reads serve without a storage-engine lookup and writes replace as\nthey are applied; resident memory on top of --cache-size; 0 turns it off")
	fs.Var(sizeValue{&f.rangeSplitSize}, "range-split-size", "split a range this node leads once its data grows past `SIZE`, at the hash\nslot that halves it by bytes (a single slot never splits); 0 is off (TiKV's\ndefault is 96MiB); turn on only if your multi-key commands, MULTI/EXEC and\nscripts use hash tags, see README 'Keys, slots and ranges': across ranges\nthey answer CROSSRANGE; at least 1MiB")
	fs.Float64Var(&c.RangeSplitQPS, "range-split-qps", 0, "split a range this node leads once its load stays above `N` commands (reads and\nwrites) a second for 10s, at the hash slot that halves its sampled load (a\nsingle hot slot never splits); the load is the commands clients sent to this\nnode for the range, not those sent to other nodes; 0 is off: as for\n--range-split-size, across ranges multi-key commands answer CROSSRANGE")
	fs.StringVar(&f.logLevel, "log-level", "warn", "`LEVEL` of logs written to stderr: debug, info, warn or error")
	fs.StringVar(&f.logFormat, "log-format", "text", "`FORMAT` of logs: text or json")
	addPeerTLSFlags(fs, &c.PeerTLS)
	addSecurityFlags(fs, &f.security, c)
	addOrchestrationFlags(fs, &f.orch)
	return f
}

// parseStart parses and validates `kvorum start` arguments into a
// server.Config (Logger not set) and logging options.
func parseStart(args []string, stdout io.Writer) (*startFlags, error) {
	f := newStartFlags()
	if err := parseFlags("start", f.fs, startHelp, args, stdout); err != nil {
		return nil, err
	}
	bad := func(format string, a ...any) error { return usageErrorf("start", format, a...) }
	if f.fs.NArg() > 0 {
		return nil, bad("unexpected argument %q (all options are --flags)", f.fs.Arg(0))
	}
	set := setFlags(f.fs)
	c := &f.cfg
	if err := applyOrchestration(f, set); err != nil {
		return nil, bad("%v", err)
	}
	if c.DataDir == "" {
		return nil, bad("--data-dir is required")
	}
	if set["id"] && c.ID == 0 {
		return nil, bad("--id must be a positive integer")
	}
	cluster, err := parseInitialCluster(f.initialCluster)
	if err != nil {
		return nil, bad("--initial-cluster: %v", err)
	}
	c.InitialCluster = cluster
	if cluster != nil && c.Join != "" {
		return nil, bad("--initial-cluster and --join are mutually exclusive (use --initial-cluster to create a cluster, --join to enter a running one)")
	}
	if cluster != nil {
		if c.ID == 0 {
			return nil, bad("--id is required with --initial-cluster")
		}
		addr, ok := cluster[c.ID]
		if !ok {
			return nil, bad("--initial-cluster does not list this node's id %d (it lists %s)", c.ID, idList(cluster))
		}
		if !set["peer-addr"] {
			c.PeerAddr = addr
		}
		if !set["advertise-peer-addr"] {
			c.AdvertisePeerAddr = addr // what the other nodes dial
		}
	}
	if c.Join != "" {
		if c.ID == 0 {
			return nil, bad("--id is required with --join")
		}
		if err := admin.ValidatePeerAddr(c.Join); err != nil {
			return nil, bad("--join: %v", err)
		}
	}
	if err := validateListenAddr(c.ClientAddr); err != nil {
		return nil, bad("--client-addr: %v", err)
	}
	if err := applySecurityFlags(&f.security, set, c); err != nil {
		return nil, bad("%v", err)
	}
	if err := validateListenAddr(c.PeerAddr); err != nil {
		return nil, bad("--peer-addr: %v", err)
	}
	if c.AdminAddr != "-" {
		if err := validateListenAddr(c.AdminAddr); err != nil {
			return nil, bad("--admin-addr: %v (or \"-\" to disable)", err)
		}
	}
	if err := c.ValidateAdvertise(); err != nil {
		return nil, bad("%v", err)
	}
	if err := validateRaftFlags(c); err != nil {
		return nil, bad("%v", err)
	}
	if err := validatePeerTLSFlags(c.PeerTLS); err != nil {
		return nil, bad("%v", err)
	}
	for _, l := range []struct {
		name string
		v    int
	}{
		{"max-key-size", c.MaxKeySize}, {"max-value-size", c.MaxValueSize}, {"max-args", c.MaxArgs},
		{"max-frame-size", c.MaxFrameSize}, {"max-clients", c.MaxClients}, {"cache-size", f.cacheSize}, {"memtable-size", f.memTableSize},
		{"record-cache", c.RecordCache},
	} {
		if l.v <= 0 {
			return nil, bad("--%s must be positive", l.name)
		}
	}
	if c.MaxKeySize > c.MaxFrameSize || c.MaxValueSize > c.MaxFrameSize {
		return nil, bad("--max-key-size (%s) and --max-value-size (%s) must not exceed --max-frame-size (%s)",
			formatSize(c.MaxKeySize), formatSize(c.MaxValueSize), formatSize(c.MaxFrameSize))
	}
	if _, err := newLogger(io.Discard, f.logLevel, f.logFormat); err != nil {
		return nil, bad("%v", err)
	}
	if set["cache-size"] {
		c.CacheSize = f.cacheSize
	}
	if set["memtable-size"] {
		c.MemTableSize = f.memTableSize
	}
	c.ReadCache = f.readCache
	if c.ReadCache == 0 {
		c.ReadCache = -1 // server.Config: negative disables, 0 is the default
	}
	c.RangeSplitSize = int64(f.rangeSplitSize)
	if err := server.ValidateRangeSplitSize(c.RangeSplitSize); err != nil {
		return nil, bad("%v", err)
	}
	if err := server.ValidateRangeSplitQPS(c.RangeSplitQPS); err != nil {
		return nil, bad("%v", err)
	}
	if set["min-free-disk"] {
		c.MinFreeDisk = f.minFreeDisk
		if c.MinFreeDisk == 0 {
			c.MinFreeDisk = -1 // server.Config: negative disables, 0 is the default
		}
	}
	return f, nil
}

func validateRaftFlags(c *server.Config) error {
	switch {
	case c.TickInterval < time.Millisecond:
		return fmt.Errorf("--tick-interval must be at least 1ms (got %v)", c.TickInterval)
	case c.HeartbeatTicks < 1:
		return errors.New("--heartbeat-ticks must be at least 1")
	case c.ElectionTicks <= c.HeartbeatTicks:
		return fmt.Errorf("--election-ticks (%d) must be greater than --heartbeat-ticks (%d)", c.ElectionTicks, c.HeartbeatTicks)
	case c.SnapshotThreshold == 0:
		return errors.New("--snapshot-threshold must be positive")
	case c.RequestTimeout <= 0:
		return errors.New("--request-timeout must be positive")
	}
	return nil
}

// parseInitialCluster parses "1=host:7379,2=host:7380". An empty string
// yields nil.
func parseInitialCluster(s string) (map[uint64]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	cluster := map[uint64]string{}
	byAddr := map[string]uint64{}
	for i, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			return nil, fmt.Errorf("entry %d is empty (stray comma?); want ID=HOST:PORT,ID=HOST:PORT,...", i+1)
		}
		idStr, addr, ok := strings.Cut(entry, "=")
		if !ok {
			return nil, fmt.Errorf("entry %q: want ID=HOST:PORT", entry)
		}
		idStr, addr = strings.TrimSpace(idStr), strings.TrimSpace(addr)
		id, err := strconv.ParseUint(idStr, 10, 64)
		if err != nil || id == 0 {
			return nil, fmt.Errorf("entry %q: node id %q is not a positive integer", entry, idStr)
		}
		if err := admin.ValidatePeerAddr(addr); err != nil {
			return nil, fmt.Errorf("entry %q: %v", entry, err)
		}
		if prev, dup := cluster[id]; dup {
			return nil, fmt.Errorf("node id %d is listed twice (%s and %s)", id, prev, addr)
		}
		if prev, dup := byAddr[addr]; dup {
			return nil, fmt.Errorf("address %s is listed for both node %d and node %d", addr, prev, id)
		}
		cluster[id] = addr
		byAddr[addr] = id
	}
	return cluster, nil
}

func idList(cluster map[uint64]string) string {
	ids := make([]uint64, 0, len(cluster))
	for id := range cluster {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatUint(id, 10)
	}
	return strings.Join(s, ", ")
}

// validateListenAddr checks a HOST:PORT to listen on; an empty host means
// all interfaces, port 0 a free port.
func validateListenAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not HOST:PORT", addr)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p > 65535 {
		return fmt.Errorf("%q has an invalid port %q", addr, port)
	}
	return nil
}

// newLogger builds the process logger from --log-level and --log-format.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lvl slog.Level
	switch strings.ToLower(level) {
	case "debug":
		lvl = slog.LevelDebug
	case "info":
		lvl = slog.LevelInfo
	case "warn", "warning":
		lvl = slog.LevelWarn
	case "error":
		lvl = slog.LevelError
	default:
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
}

// runStart is `kvorum start`.
func runStart(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runStartWith(ctx, args, stdout, stderr, server.Start)
}

// runStartWith is `kvorum start` with startNode starting the node (tests
// pass one that wraps server.Start).
func runStartWith(ctx context.Context, args []string, stdout, stderr io.Writer, startNode func(server.Config) (*server.Node, error)) error {
	f, err := parseStart(args, stdout)
	if err != nil {
		return err
	}
	if f.orch.validateOnly {
		return validateConfig(f, stdout)
	}
	log, _ := newLogger(stderr, f.logLevel, f.logFormat)
	cfg := f.cfg
	cfg.Logger = log
	if cluster := cfg.InitialCluster; cluster != nil {
		if addr := cluster[cfg.ID]; addr != cfg.PeerAddr && !server.IsWildcard(cfg.PeerAddr) {
			log.Warn("--peer-addr differs from this node's --initial-cluster entry; other nodes will dial the --initial-cluster address",
				"peer_addr", cfg.PeerAddr, "initial_cluster_entry", addr)
		}
	}

	warnInsecureAdmin(log, &cfg)
	for _, w := range exposureWarnings(&cfg) {
		log.Warn("INSECURE: " + w)
	}

	startAttrs := []any{"version", versionString(), "data_dir", cfg.DataDir}
	if cfg.ID != 0 {
		startAttrs = append(startAttrs, "id", cfg.ID)
	}
	log.Info("starting kvorum", startAttrs...)
	// A fatal storage error on one of Pebble's own goroutines cannot be
	// unwound: it has been logged; exit with one clear line instead of a
	// goroutine dump (see server.Config.StorageFatal).
	cfg.StorageFatal = func(msg string) {
		fmt.Fprintf(stderr, "kvorum start: storage failure: %s; the node cannot continue; restart it after the disk is fixed\n", msg)
		os.Exit(exitError)
	}
	n, err := startNode(cfg)
	if err != nil {
		return fmt.Errorf("starting node: %w", err)
	}
	log.Info("kvorum node running",
		"id", n.ID(), "client_addr", n.ClientAddr(), "tls_client_addr", n.TLSClientAddr(), "peer_addr", n.PeerAddr(), "admin_addr", n.AdminAddr(),
		"advertise_client_addr", n.AdvertiseClientAddr(), "advertise_peer_addr", n.AdvertisePeerAddr(), "data_dir", cfg.DataDir)

	// Report when the cluster has a leader, without holding up anything.
	go func() {
		if err := n.WaitLeader(ctx); err != nil {
			if ctx.Err() == nil && !errors.Is(err, store.ErrStopped) {
				log.Warn("waiting for a leader", "err", err)
			}
			return
		}
		st := n.Status()
		log.Info("cluster has a leader", "leader", st.Leader, "term", st.Term, "role", st.Role)
	}()

	select {
	case <-ctx.Done():
	case err := <-n.Done():
		// The node stopped itself: its storage failed and it will not run
		// on a state it could not persist. It logged why; exit non-zero
		// with the same message.
		return err
	}
	log.Info("stopping kvorum node", "id", n.ID())
	// A leader hands its leadership over first (bounded by two election
	// timeouts), so that the cluster does not wait out an election.
	if err := n.Shutdown(context.Background()); err != nil {
		return fmt.Errorf("stopping node: %w", err)
	}
	log.Info("kvorum node stopped", "id", n.ID())
	return nil
}
