package lockbench

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// Targets and modes.
const (
	TargetKvorum  = "kvorum"
	TargetRedlock = "redlock"
	// TargetZookeeper is optional: not in DefaultTargets.
	TargetZookeeper = "zookeeper"
	ModeOwn         = "own"
	ModeShared      = "shared"
)

// Defaults (the paper's runs lasted 2 minutes; 10s gives stable medians).
const (
	DefaultHold              = 3 * time.Millisecond
	DefaultDuration          = 10 * time.Second
	DefaultTTL               = 10 * time.Second
	DefaultRedlockRetryDelay = 200 * time.Millisecond // python redlock's retry_delay
	MaxProcs                 = 64
	// ZookeeperEnsemble is how many ZooKeeper servers the benchmark
	// starts when no --zookeeper addresses are given.
	ZookeeperEnsemble = 3
)

// DefaultTargets run when --targets is not given; zookeeper, which needs
// java and a ZooKeeper installation, runs only when asked for.
var DefaultTargets = []string{TargetKvorum, TargetRedlock}

// AllTargets are the targets --targets accepts.
var AllTargets = []string{TargetKvorum, TargetRedlock, TargetZookeeper}

// Config is one benchmark invocation: every target × mode × procs.
type Config struct {
	Targets []string // TargetKvorum, TargetRedlock, TargetZookeeper
	Procs   []int    // client processes per run
	Modes   []string // ModeOwn, ModeShared

	Hold     time.Duration // how long each acquisition is held
	Duration time.Duration // of each run
	// TTL is the kvorum lease TTL, the Redlock key TTL and the ZooKeeper
	// session timeout: how long a lock outlives a crashed holder. Far
	// above Hold. (ZooKeeper servers bound session timeouts to 2 to 20
	// ticks: 4s to 40s on the local ensemble.)
	TTL time.Duration
	// RedlockRetryDelay: after a failed Redlock attempt a client waits a
	// random time in [0, RedlockRetryDelay) before trying again.
	RedlockRetryDelay time.Duration

	// KvorumAddrs are client addresses of a running kvorum cluster; empty:
	// start a local 3-node cluster.
	KvorumAddrs []string
	// RedisAddrs are independent Redis instances for Redlock; empty: start
	// 3 redis-server processes (RedisServer, else redis-server on PATH).
	RedisAddrs  []string
	RedisServer string
	// ZookeeperAddrs are the client addresses of a running ZooKeeper
	// ensemble (or standalone server); empty: start a local 3-node
	// ensemble with java and ZookeeperServer (a server jar or an Apache
	// ZooKeeper directory; default DefaultZookeeperServer).
	ZookeeperAddrs  []string
	ZookeeperServer string

	// Executable runs workers: Executable WorkerArgs... with WorkerEnv set.
	Executable string
	WorkerArgs []string
	// NodeBinary is the kvorum binary the local cluster runs ("kvorum
	// start"); default Executable.
	NodeBinary string
	// Dir holds the local cluster's and redis-servers' data and logs;
	// "" = a new temporary directory, removed unless a run failed.
	Dir string

	Progress io.Writer // progress lines; nil = discarded
}

// Validate checks the configuration (messages name the CLI flags).
func (c *Config) Validate() error {
	if len(c.Targets) == 0 {
		return errors.New("--targets: no target")
	}
	if err := checkSet("--targets", c.Targets, AllTargets...); err != nil {
		return err
	}
	if err := checkSet("--modes", c.Modes, ModeOwn, ModeShared); err != nil {
		return err
	}
	if len(c.Modes) == 0 {
		return errors.New("--modes: no mode")
	}
	if len(c.Procs) == 0 {
		return errors.New("--procs: no process count")
	}
	seen := map[int]bool{}
	for _, p := range c.Procs {
		if p < 1 || p > MaxProcs {
			return fmt.Errorf("--procs: %d is not between 1 and %d", p, MaxProcs)
		}
		if seen[p] {
			return fmt.Errorf("--procs: %d given twice", p)
		}
		seen[p] = true
	}
	if c.Duration <= 0 {
		return errors.New("--duration must be positive")
	}
	if c.Hold < 0 {
		return errors.New("--hold must not be negative")
	}
	if c.TTL < 100*time.Millisecond || c.TTL > 24*time.Hour {
		return fmt.Errorf("--ttl must be between 100ms and 24h (got %v)", c.TTL)
	}
	if c.TTL < 10*c.Hold {
		return fmt.Errorf("--ttl (%v) must be at least 10 × --hold (%v): a lock must not expire while held", c.TTL, c.Hold)
	}
	if c.RedlockRetryDelay <= 0 {
		return errors.New("--redlock-retry-delay must be positive")
	}
	for _, a := range append(append(append([]string{}, c.KvorumAddrs...), c.RedisAddrs...), c.ZookeeperAddrs...) {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return fmt.Errorf("address %q is not host:port", a)
		}
	}
	if len(c.KvorumAddrs) > 0 && !has(c.Targets, TargetKvorum) {
		return errors.New("--kvorum given but --targets does not include kvorum")
	}
	if len(c.RedisAddrs) > 0 && !has(c.Targets, TargetRedlock) {
		return errors.New("--redis given but --targets does not include redlock")
	}
	if len(c.ZookeeperAddrs) > 0 && !has(c.Targets, TargetZookeeper) {
		return errors.New("--zookeeper given but --targets does not include zookeeper")
	}
	if c.ZookeeperServer != "" && len(c.ZookeeperAddrs) > 0 {
		return errors.New("--zookeeper-server and --zookeeper exclude each other (the server runs only when no addresses are given)")
	}
	if c.Executable == "" {
		return errors.New("no executable to run workers with")
	}
	return nil
}

func checkSet(flag string, vals []string, allowed ...string) error {
	seen := map[string]bool{}
	for _, v := range vals {
		if !has(allowed, v) {
			return fmt.Errorf("%s: unknown %q (want %v)", flag, v, allowed)
		}
		if seen[v] {
			return fmt.Errorf("%s: %q given twice", flag, v)
		}
		seen[v] = true
	}
	return nil
}

func has(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
