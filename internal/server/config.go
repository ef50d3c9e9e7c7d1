package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvorum/kvorum/internal/tlsconf"
	"github.com/kvorum/kvorum/internal/transport"
)

// Config configures one kvorum node. Zero values mean the documented default
// (see EnsureDefaults).
type Config struct {
	// ID is this node's id, > 0, unique in the cluster. Required on first
	// start; on restart it is read from the data directory when zero.
	ID uint64
	// DataDir holds the node's Pebble store (Raft log, hard state, data).
	DataDir string
	// FS is the filesystem Pebble uses. Default: the OS filesystem. Tests
	// pass vfs.NewMem().
	FS vfs.FS

	// ClientAddr is where the RESP server listens in plain text. Default
	// 127.0.0.1:6379; "-" switches the plain-text port off (Redis's
	// `port 0`), which needs TLSClientAddr.
	ClientAddr string
	// PeerAddr is where the peer (Raft, snapshots, forwarding) server listens
	// and, without AdvertisePeerAddr, what other nodes dial. Default
	// 127.0.0.1:7379.
	PeerAddr string
	// AdvertisePeerAddr is the address this node tells the cluster to reach
	// it at: what it sends when it joins, its entry in the member list of a
	// single-node cluster it founds, what Status reports. It may name a host
	// (a container's name), which the other nodes resolve at every dial.
	// Default: PeerAddr (as bound). It must not be a wildcard address
	// (0.0.0.0, ::), and a node that joins while listening on one needs it.
	AdvertisePeerAddr string
	// AdvertiseClientAddr is the client address this node reports (Status,
	// `kvorum ctl status`, logs) when clients reach it at another address
	// than it listens on (a container's published port). Default:
	// ClientAddr (as bound).
	AdvertiseClientAddr string
	// SentinelMasterName is the master name this node's Redis Sentinel
	// discovery commands know the cluster by (SENTINEL
	// GET-MASTER-ADDR-BY-NAME <name>, +switch-master). Default "kvorum".
	SentinelMasterName string
	// AdminAddr is the admin HTTP address (/metrics, /healthz, /readyz, ctl
	// API). Default 127.0.0.1:8379. Empty after defaults disables nothing:
	// use "-" to disable the admin server.
	AdminAddr string

	// Security of the client and admin ports (see tlsconf). The
	// certificate files are re-read when they change.
	//
	// TLSClientAddr, when set, is a second RESP listener that speaks TLS
	// with TLSCertFile and TLSKeyFile (both required then). TLSCAFile holds
	// the CAs client certificates must chain to; TLSAuthClients is Redis's
	// tls-auth-clients: "yes" (a client certificate is required), "optional"
	// (verified if sent) or "no"; empty means yes when TLSCAFile is set, no
	// otherwise.
	TLSClientAddr  string
	TLSCertFile    string
	TLSKeyFile     string
	TLSCAFile      string
	TLSAuthClients string
	// AdminToken, when set, is required as "Authorization: Bearer <token>"
	// on every admin path but /healthz and /readyz. AdminTLSCertFile and
	// AdminTLSKeyFile make the admin server speak HTTPS; with
	// AdminTLSCAFile a client certificate signed by that CA is accepted
	// instead of the token (and, without a token, required). Pprof serves
	// /debug/pprof on the admin port (off: 404).
	AdminToken       string
	AdminTLSCertFile string
	AdminTLSKeyFile  string
	AdminTLSCAFile   string
	Pprof            bool

	// InitialCluster maps node id to peer address for a brand-new cluster.
	// Ignored when the data directory already holds state.
	InitialCluster map[uint64]string
	// Join is the peer address of a running cluster member to ask for
	// admission. Mutually exclusive with InitialCluster.
	Join string

	// TickInterval is the Raft logical clock period. Default 100ms.
	TickInterval time.Duration
	// ElectionTicks is the election timeout in ticks. Default 10 (1s).
	ElectionTicks int
	// HeartbeatTicks is the heartbeat interval in ticks. Default 1 (100ms).
	HeartbeatTicks int
	// SnapshotThreshold: once this many applied entries sit in the log, it is
	// truncated (a snapshot is the applied state itself). Default 10000.
	SnapshotThreshold uint64

	// Limits on client input; each refused with a clear error.
	MaxKeySize   int // default 512 KiB
	MaxValueSize int // default 64 MiB
	MaxArgs      int // default 1,048,576 arguments per command
	MaxFrameSize int // default 128 MiB per command frame
	MaxClients   int // default 10,000 connections

	// MinFreeDisk is the free space, in bytes, below which the node refuses
	// writes with an error (reads keep working) until space is freed: the
	// filesystem of DataDir is polled every DiskCheckInterval. 0 means the
	// default (DefaultMinFreeDisk, 256 MiB); a negative value disables the
	// check. See disk.go.
	MinFreeDisk int
	// DiskCheckInterval is how often free space is polled. 0 means 500ms.
	DiskCheckInterval time.Duration
	// CacheSize is the size in bytes of the storage engine's block cache.
	// 0 means storage.DefaultCacheSize (32 MiB). Pebble's memtables come on
	// top of it (storage.pebbleCacheSize).
	CacheSize int
	// MemTableSize is the size in bytes of one of the storage engine's
	// memtables (write buffers; two exist while one is flushed). 0 means
	// storage.DefaultMemTableSize (16 MiB).
	MemTableSize int
	// RecordCache is how many keys' metadata records (type, deadline,
	// incarnation; the value too when at most 128 bytes) the apply path
	// keeps in memory, so that a write need not look up in the storage
	// engine the record it replaces (package reccache). A write to a key
	// not cached does that lookup on the Ready loop: under workload A with
	// 100,000 keys and 20,000 cached it was 13 % of a follower's CPU.
	// About 200 bytes of heap per key (~400 of resident memory with Go's
	// GC headroom). 0 means DefaultRecordCache.
	RecordCache int
	// ReadCache is the size in bytes of the read path's record cache
	// (reccache.Shared): the whole records of recently read keys, values
	// included, that GET and other reads of a key's record serve without a
	// lookup in the storage engine; writes replace them as they are
	// applied. 0 means DefaultReadCache; negative, none.
	ReadCache int

	// LeaseReads lets the leader serve linearizable reads from a leader
	// lease, with no Raft message per read batch (store.Config.LeaseReads;
	// see docs/architecture.md, "Life of a read"). It assumes that the
	// nodes' clocks run at rates within 10% of each other (never their
	// wall-clock time: leases use the monotonic clock). False, the zero
	// value: every read batch costs a ReadIndex round. `kvorum start`
	// turns it on unless --lease-reads=false.
	LeaseReads bool

	// RequestTimeout bounds how long a client command waits for a leader,
	// a commit or a read barrier before it gets an error. Default 10s.
	RequestTimeout time.Duration

	// PeerInterceptor, when set, sees every outgoing peer message and call
	// (fault injection in tests).
	PeerInterceptor transport.Interceptor
	// PeerDial, when set, opens the peer connections this node dials
	// (transport.Config.Dial): tests resolve host names through it.
	PeerDial func(ctx context.Context, network, addr string) (net.Conn, error)

	// PeerTLS, when its files are set (all three or none), makes the peer
	// port mutual TLS: every connection accepted or dialed presents this
	// node's certificate and requires one of the CA in PeerTLS.CAFile
	// (transport.PeerTLS; the files are re-read when they change). Every
	// node of a cluster must have it, or none.
	PeerTLS transport.TLSFiles

	// RequirePass is Redis's requirepass: the default user's password
	// (the default user then needs AUTH). Ignored with ACLFile.
	RequirePass string
	// ACLFile is Redis's aclfile: the users a new cluster starts with,
	// what ACL LOAD reads and ACL SAVE writes. It must exist and load.
	// The users are cluster state: once changed (ACL SETUSER, ...), the
	// replicated users replace those of RequirePass and ACLFile.
	ACLFile string

	// Logger receives structured logs. Default: warnings and errors to stderr.
	Logger *slog.Logger

	// StorageFatal is called when the node's storage fails on one of
	// Pebble's own goroutines (a flush or compaction that cannot write or
	// sync), after the failure was logged; msg is Pebble's message. Such a
	// failure cannot be unwound, so StorageFatal must not return. Default:
	// a panic. `kvorum start` exits the process with one clear line. (A
	// failure while committing a Raft round instead stops the node: see
	// Node.Done.) Passed to storage.Open as Options.BackgroundFatal.
	StorageFatal func(msg string)

	// Now is the node's wall clock in Unix milliseconds: what the leader
	// stamps into log entries (TTL deadlines) and what reads compare
	// deadlines with. Default time.Now. The torture harness makes clocks
	// jump with it.
	Now func() int64

	// RangeSplitSize, when positive, turns on the split queue: a range
	// whose data (Pebble's estimate of its span on disk) grows past this
	// many bytes is split by its leader at a hash slot that halves it by
	// bytes (ranges_splitqueue.go, docs/ranges.md §5). 0, the default, is
	// off: a multi-key command, MULTI/EXEC or script whose keys end up in
	// different ranges answers CROSSRANGE until the cross-range commit
	// protocol lands, so splitting is the operator's choice (keys that
	// share a hash tag always stay together). TiKV's default is 96 MiB.
	// At least MinRangeSplitSize; negative is an error.
	RangeSplitSize int64

	// RangeSplitQPS, when positive, turns on splits by load: a range this
	// node leads whose client commands (reads and writes) counted on this
	// node stay above this many per second for the whole load window (10
	// s, ranges_load.go) is split by the split queue at the hash slot that
	// halves its sampled load (ranges_splitqueue.go, docs/ranges.md §5).
	// The load is this node's count only: the commands clients sent to
	// it, including those it forwarded to the leader; not the commands
	// other nodes forwarded to it (those nodes count them). 0, the
	// default, is off, for the same reason as RangeSplitSize (CROSSRANGE).
	// Negative is an error.
	RangeSplitQPS float64

	// Unsafe switches off a safety mechanism on purpose. They exist only so
	// that the fault suites (internal/torture, docs/reliability.md) can show
	// that they catch the violations that follow; never set them on a node
	// that holds data anyone cares about. No command-line flag sets them.
	Unsafe Unsafe

	// testRanges, if more than 1, makes a new cluster's keyspace start
	// split into that many ranges of equal slot intervals, each with every
	// initial member (docs/ranges.md §3.6). Only tests set it: splits by
	// hand (§3.5) are to come.
	testRanges int
	// testRangesRepairEvery, if set, replaces rangesRepairEvery (how often
	// the node looks for holes in its slot table): tests shorten it.
	testRangesRepairEvery time.Duration
	// testSplitQueueEvery, if set, replaces splitQueueEvery (how often the
	// split queue looks at range sizes); testAnyRangeSplitSize lets
	// RangeSplitSize be below MinRangeSplitSize. Tests set them.
	testSplitQueueEvery   time.Duration
	testAnyRangeSplitSize bool
	// testLoadSplitWindow, if set, replaces loadWindow as the span over
	// which a range's load must stay above RangeSplitQPS (at most
	// loadWindow). Tests shorten it.
	testLoadSplitWindow time.Duration
}

// Unsafe lists the deliberate breakages the fault suites test themselves
// with.
type Unsafe struct {
	// NoSync commits the Raft log and hard state without fsync, so a write
	// is acknowledged before it is durable.
	NoSync bool
	// StaleReads serves reads from local state without a ReadIndex round.
	StaleReads bool
}

// Defaults (documented in the README's configuration reference).
const (
	DefaultClientAddr        = "127.0.0.1:6379"
	DefaultSentinelMaster    = "kvorum"
	DefaultPeerAddr          = "127.0.0.1:7379"
	DefaultAdminAddr         = "127.0.0.1:8379"
	DefaultTickInterval      = 100 * time.Millisecond
	DefaultElectionTicks     = 10
	DefaultHeartbeatTicks    = 1
	DefaultSnapshotThreshold = 10000
	DefaultMaxKeySize        = 512 << 10
	DefaultMaxValueSize      = 64 << 20
	DefaultMaxArgs           = 1 << 20
	DefaultMaxFrameSize      = 128 << 20
	DefaultMaxClients        = 10000
	DefaultRecordCache       = 100_000
	DefaultReadCache         = 32 << 20
	DefaultRequestTimeout    = 10 * time.Second
)

// EnsureDefaults fills zero fields with their defaults.
func (c *Config) EnsureDefaults() {
	if c.FS == nil {
		c.FS = vfs.Default
	}
	if c.ClientAddr == "" {
		c.ClientAddr = DefaultClientAddr
	}
	if c.SentinelMasterName == "" {
		c.SentinelMasterName = DefaultSentinelMaster
	}
	if c.PeerAddr == "" {
		c.PeerAddr = DefaultPeerAddr
	}
	if c.AdminAddr == "" {
		c.AdminAddr = DefaultAdminAddr
	}
	if c.TickInterval == 0 {
		c.TickInterval = DefaultTickInterval
	}
	if c.ElectionTicks == 0 {
		c.ElectionTicks = DefaultElectionTicks
	}
	if c.HeartbeatTicks == 0 {
		c.HeartbeatTicks = DefaultHeartbeatTicks
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = DefaultSnapshotThreshold
	}
	if c.RecordCache == 0 {
		c.RecordCache = DefaultRecordCache
	}
	if c.ReadCache == 0 {
		c.ReadCache = DefaultReadCache
	}
	if c.MaxKeySize == 0 {
		c.MaxKeySize = DefaultMaxKeySize
	}
	if c.MaxValueSize == 0 {
		c.MaxValueSize = DefaultMaxValueSize
	}
	if c.MaxArgs == 0 {
		c.MaxArgs = DefaultMaxArgs
	}
	if c.MaxFrameSize == 0 {
		c.MaxFrameSize = DefaultMaxFrameSize
	}
	if c.MaxClients == 0 {
		c.MaxClients = DefaultMaxClients
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.Now == nil {
		c.Now = func() int64 { return time.Now().UnixMilli() }
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
}

// Validate reports configuration errors a user can fix.
func (c *Config) Validate() error {
	if c.DataDir == "" {
		return errors.New("--data-dir is required")
	}
	if c.ElectionTicks <= c.HeartbeatTicks {
		return fmt.Errorf("election ticks (%d) must be greater than heartbeat ticks (%d)", c.ElectionTicks, c.HeartbeatTicks)
	}
	if err := c.ValidateSecurity(); err != nil {
		return err
	}
	if len(c.InitialCluster) > 0 && c.Join != "" {
		return errors.New("--initial-cluster and --join are mutually exclusive")
	}
	if err := ValidateRangeSplitSize(c.RangeSplitSize); err != nil && !(c.testAnyRangeSplitSize && c.RangeSplitSize > 0) {
		return err
	}
	if err := ValidateRangeSplitQPS(c.RangeSplitQPS); err != nil {
		return err
	}
	if strings.IndexFunc(c.SentinelMasterName, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		// +switch-master's message separates its fields with spaces.
		return fmt.Errorf("--sentinel-master-name %q: a name without spaces or control characters is required", c.SentinelMasterName)
	}
	if f := c.PeerTLS; f.Enabled() && (f.CertFile == "" || f.KeyFile == "" || f.CAFile == "") {
		return errors.New("peer TLS needs --peer-cert-file, --peer-key-file and --peer-trusted-ca-file, all three")
	}
	if len(c.InitialCluster) > 0 {
		if _, ok := c.InitialCluster[c.ID]; c.ID != 0 && !ok {
			return fmt.Errorf("--initial-cluster does not list this node's id %d", c.ID)
		}
	}
	return c.ValidateAdvertise()
}

// ValidateAdvertise checks the advertised addresses: each must be one the
// other nodes or clients can dial, and a node that would advertise its
// wildcard listen address (it joins with --peer-addr 0.0.0.0:PORT) must
// be told what to advertise. Validate includes it.
func (c *Config) ValidateAdvertise() error {
	if c.AdvertisePeerAddr != "" {
		if err := ValidateAdvertiseAddr(c.AdvertisePeerAddr); err != nil {
			return fmt.Errorf("--advertise-peer-addr: %w", err)
		}
		if addr, ok := c.InitialCluster[c.ID]; ok && c.ID != 0 && addr != c.AdvertisePeerAddr {
			return fmt.Errorf("--advertise-peer-addr %s differs from this node's --initial-cluster entry %d=%s: the other nodes dial the --initial-cluster address; make them the same", c.AdvertisePeerAddr, c.ID, addr)
		}
	} else if c.Join != "" && IsWildcard(c.PeerAddr) {
		return fmt.Errorf("--peer-addr %s listens on every interface and is no address the other nodes can dial: set --advertise-peer-addr to the address they reach this node at (its host name or IP, and port)", c.PeerAddr)
	}
	if c.AdvertiseClientAddr != "" {
		if c.ClientAddr == "-" {
			return errors.New("--advertise-client-addr is the plain-text client port's address, which is off (--port 0)")
		}
		if err := ValidateAdvertiseAddr(c.AdvertiseClientAddr); err != nil {
			return fmt.Errorf("--advertise-client-addr: %w", err)
		}
	}
	return nil
}

// ValidateAdvertiseAddr checks an address to advertise: HOST:PORT with a
// host (a name or an IP, not a wildcard such as 0.0.0.0 or ::) and a port
// 1-65535.
func ValidateAdvertiseAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not HOST:PORT", addr)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return fmt.Errorf("%q has an invalid port %q (want 1-65535)", addr, port)
	}
	if host == "" || IsWildcard(addr) {
		return fmt.Errorf("%q is a wildcard listen address: advertise an address others can dial (a host name or IP of this node)", addr)
	}
	return nil
}

// IsWildcard reports whether the listen address addr has an empty or
// unspecified host (0.0.0.0, ::): it listens on every interface.
func IsWildcard(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// ValidateSecurity checks the TLS and admin settings (the files are read
// by Start, which reports what is wrong with them). Validate includes it.
func (c *Config) ValidateSecurity() error {
	if c.ClientAddr == "-" && c.TLSClientAddr == "" {
		return errors.New("the plain-text client port is off (--port 0) and no --tls-port is set: clients could not connect")
	}
	if c.TLSClientAddr != "" && (c.TLSCertFile == "" || c.TLSKeyFile == "") {
		return errors.New("--tls-port needs --tls-cert-file and --tls-key-file")
	}
	if c.TLSClientAddr == "" && (c.TLSCertFile != "" || c.TLSKeyFile != "" || c.TLSCAFile != "" || c.TLSAuthClients != "") {
		return errors.New("--tls-cert-file, --tls-key-file, --tls-ca-cert-file and --tls-auth-clients need --tls-port (the port that speaks TLS)")
	}
	if c.TLSAuthClients != "" {
		a, err := tlsconf.ParseClientAuth(c.TLSAuthClients)
		if err != nil {
			return fmt.Errorf("--tls-auth-clients %w", err)
		}
		if a != tlsconf.AuthNo && c.TLSCAFile == "" {
			return fmt.Errorf("--tls-auth-clients %s needs --tls-ca-cert-file (the CA that signs client certificates)", a)
		}
	}
	if (c.AdminTLSCertFile == "") != (c.AdminTLSKeyFile == "") {
		return errors.New("--admin-tls-cert-file and --admin-tls-key-file go together")
	}
	if c.AdminTLSCAFile != "" && c.AdminTLSCertFile == "" {
		return errors.New("--admin-tls-ca-cert-file needs --admin-tls-cert-file and --admin-tls-key-file (client certificates are checked over HTTPS)")
	}
	return nil
}

// tlsAuthClients is the effective tls-auth-clients.
func (c *Config) tlsAuthClients() tlsconf.ClientAuth {
	if c.TLSAuthClients != "" {
		a, _ := tlsconf.ParseClientAuth(c.TLSAuthClients)
		return a
	}
	if c.TLSCAFile != "" {
		return tlsconf.AuthYes
	}
	return tlsconf.AuthNo
}
