package kvbench

import (
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Workload is a mix of operations. The shares add up to 1.
type Workload struct {
	Name                 string
	Read, Update, Insert float64
	// Load inserts record numbers 0..Records-1 once each and ends when
	// they are all in (no warmup, no duration); insert-only workloads
	// insert new record numbers from Records up, for the duration.
	Load bool
	Desc string
}

// Workloads lists the workloads, by their --workloads name.
var Workloads = []Workload{
	{Name: "load", Insert: 1, Load: true, Desc: "insert the --records records once (YCSB's load phase), then stop"},
	{Name: "a", Read: 0.5, Update: 0.5, Desc: "YCSB A: 50% read, 50% update"},
	{Name: "b", Read: 0.95, Update: 0.05, Desc: "YCSB B: 95% read, 5% update"},
	{Name: "c", Read: 1, Desc: "YCSB C: 100% read"},
	{Name: "90/10", Read: 0.9, Update: 0.1, Desc: "read-heavy (paper 002): 90% read, 10% update"},
	{Name: "5/95", Read: 0.05, Update: 0.95, Desc: "write-heavy (paper 002): 5% read, 95% update"},
	{Name: "insert", Insert: 1, Desc: "insert only: new records beyond the loaded ones"},
}

// Operation kinds.
const (
	KindRead = iota
	KindUpdate
	KindInsert
	numKinds
)

var kindNames = [numKinds]string{"read", "update", "insert"}

// Target kinds (URL schemes).
const (
	SchemeRedis = "redis"
	SchemeEtcd  = "etcd"
)

// Servers the benchmark can start (--start), each a target of that name.
const (
	StartKvorum   = "kvorum"
	StartRedis    = "redis"
	StartRedisAOF = "redis-aof"
	StartEtcd     = "etcd"
)

// Startable lists the --start names.
var Startable = []string{StartKvorum, StartRedis, StartRedisAOF, StartEtcd}

// Target is a system to measure: a name and where it listens.
type Target struct {
	Name   string
	Scheme string   // SchemeRedis or SchemeEtcd
	Addrs  []string // host:port; clients are spread over them round-robin
	PIDs   []int    // server processes whose CPU and memory are reported
}

// URL is the target's address as given on the command line.
func (t Target) URL() string { return t.Scheme + "://" + strings.Join(t.Addrs, ",") }

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// ParseURL parses redis://host:port[,host:port...] or etcd://host:port[,...].
func ParseURL(u string) (scheme string, addrs []string, err error) {
	scheme, rest, ok := strings.Cut(strings.TrimSpace(u), "://")
	if !ok {
		return "", nil, fmt.Errorf("%q is not a URL (want redis://host:port or etcd://host:port)", u)
	}
	if scheme != SchemeRedis && scheme != SchemeEtcd {
		return "", nil, fmt.Errorf("%q: unknown scheme %q (want redis or etcd)", u, scheme)
	}
	for _, a := range strings.Split(strings.TrimSuffix(rest, "/"), ",") {
		a = strings.TrimSpace(a)
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" {
			return "", nil, fmt.Errorf("%q: address %q is not host:port", u, a)
		}
		if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
			return "", nil, fmt.Errorf("%q: bad port in %q", u, a)
		}
		addrs = append(addrs, a)
	}
	return scheme, addrs, nil
}

// ParseTarget parses NAME=URL.
func ParseTarget(spec string) (Target, error) {
	name, u, ok := strings.Cut(strings.TrimSpace(spec), "=")
	if !ok {
		return Target{}, fmt.Errorf("%q is not NAME=URL (e.g. mykv=redis://10.0.0.1:6379)", spec)
	}
	if !nameRE.MatchString(name) {
		return Target{}, fmt.Errorf("%q: bad target name %q (letters, digits, '_', '.', '-')", spec, name)
	}
	scheme, addrs, err := ParseURL(u)
	if err != nil {
		return Target{}, err
	}
	return Target{Name: name, Scheme: scheme, Addrs: addrs}, nil
}

// ParseTargets parses the values of --target: each NAME=URL, or several
// separated by commas (a comma followed by a NAME= starts the next target;
// other commas separate the addresses of one URL).
func ParseTargets(values []string) ([]Target, error) {
	var out []Target
	for _, v := range values {
		for _, spec := range splitTargets(v) {
			t, err := ParseTarget(spec)
			if err != nil {
				return nil, err
			}
			out = append(out, t)
		}
	}
	return out, nil
}

var nextTargetRE = regexp.MustCompile(`,\s*[A-Za-z0-9][A-Za-z0-9_.-]*=`)

func splitTargets(v string) []string {
	var out []string
	for {
		loc := nextTargetRE.FindStringIndex(v)
		if loc == nil {
			break
		}
		out = append(out, v[:loc[0]])
		v = v[loc[0]+1:]
	}
	return append(out, v)
}

// ParsePIDs parses NAME=PID,PID,... (the values of --pids).
func ParsePIDs(values []string) (map[string][]int, error) {
	m := map[string][]int{}
	for _, v := range values {
		name, list, ok := strings.Cut(strings.TrimSpace(v), "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("%q is not NAME=PID,PID,...", v)
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("%q given twice", name)
		}
		for _, p := range strings.Split(list, ",") {
			pid, err := strconv.Atoi(strings.TrimSpace(p))
			if err != nil || pid <= 0 {
				return nil, fmt.Errorf("%q: %q is not a process id", v, p)
			}
			m[name] = append(m[name], pid)
		}
	}
	return m, nil
}

// ParseWorkloads parses a comma-separated list of workload names.
func ParseWorkloads(s string) ([]Workload, error) {
	var out []Workload
	for _, name := range strings.Split(s, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		if name == "" {
			continue
		}
		i := slices.IndexFunc(Workloads, func(w Workload) bool { return w.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("unknown workload %q (known: %s)", name, strings.Join(WorkloadNames(), ", "))
		}
		out = append(out, Workloads[i])
	}
	if len(out) == 0 {
		return nil, errors.New("no workload")
	}
	return out, nil
}

// WorkloadNames lists the --workloads names.
func WorkloadNames() []string {
	var n []string
	for _, w := range Workloads {
		n = append(n, w.Name)
	}
	return n
}

// Defaults.
const (
	DefaultRecords   = 100_000
	DefaultValueSize = 1024
	DefaultDuration  = 10 * time.Second
	DefaultWarmup    = 2 * time.Second
	DefaultPipeline  = 1
	DefaultSeed      = 1
	MaxClients       = 1024
	MaxPipeline      = 1024
	MaxValueSize     = 64 << 20
)

// Key distributions.
const (
	DistUniform = "uniform"
	DistZipfian = "zipfian"
)

// How kvorum's clients pick nodes (--kvorum-nodes).
const (
	KvorumNodesAll    = "all"
	KvorumNodesLeader = "leader"
)

// Config is one benchmark run.
type Config struct {
	Workloads    []Workload
	Distribution string
	Records      int
	ValueSize    int
	Clients      []int
	Pipeline     int
	Duration     time.Duration
	Ops          int64 // cap on measured operations per cell (0: none)
	Warmup       time.Duration
	Seed         uint64

	Targets  []Target         // given by URL
	Start    []string         // servers to start (Startable), each a target of that name
	PIDs     map[string][]int // server PIDs of given targets
	Baseline string           // target the ratios are relative to ("": none)

	KvorumNodes string // KvorumNodesAll or KvorumNodesLeader
	Executable  string // the kvorum binary for --start kvorum
	RedisServer string // redis-server binary ("": on PATH)
	EtcdBin     string // etcd binary ("": /usr/bin/etcd or on PATH)
	Dir         string // data and logs of started servers ("": a temporary directory)

	Progress io.Writer // progress lines (nil: none)
	// Ticker asks for a progress line every second while a cell runs
	// (else one line per cell).
	Ticker bool
}

// TargetNames lists every target in the order they run: given ones, then
// started ones.
func (c *Config) TargetNames() []string {
	var n []string
	for _, t := range c.Targets {
		n = append(n, t.Name)
	}
	return append(n, c.Start...)
}

// Validate checks the configuration; messages name the flags.
func (c *Config) Validate() error {
	switch {
	case len(c.Workloads) == 0:
		return errors.New("--workloads: no workload")
	case c.Distribution != DistUniform && c.Distribution != DistZipfian:
		return fmt.Errorf("--distribution: %q is neither uniform nor zipfian", c.Distribution)
	case c.Records < 1:
		return errors.New("--records must be at least 1")
	case c.ValueSize < 1 || c.ValueSize > MaxValueSize:
		return fmt.Errorf("--value-size must be between 1 and %d", MaxValueSize)
	case len(c.Clients) == 0:
		return errors.New("--clients: no client count")
	case c.Pipeline < 1 || c.Pipeline > MaxPipeline:
		return fmt.Errorf("--pipeline must be between 1 and %d", MaxPipeline)
	case c.Duration <= 0 && c.Ops <= 0:
		return errors.New("--duration must be positive (or give --ops)")
	case c.Duration < 0:
		return errors.New("--duration must not be negative")
	case c.Ops < 0:
		return errors.New("--ops must not be negative")
	case c.Warmup < 0:
		return errors.New("--warmup must not be negative")
	case c.KvorumNodes != KvorumNodesAll && c.KvorumNodes != KvorumNodesLeader:
		return fmt.Errorf("--kvorum-nodes: %q is neither all nor leader", c.KvorumNodes)
	}
	for _, n := range c.Clients {
		if n < 1 || n > MaxClients {
			return fmt.Errorf("--clients: %d is not between 1 and %d", n, MaxClients)
		}
	}
	seen := map[string]bool{}
	for _, s := range c.Start {
		if !slices.Contains(Startable, s) {
			return fmt.Errorf("--start: unknown server %q (known: %s)", s, strings.Join(Startable, ", "))
		}
	}
	for _, n := range c.TargetNames() {
		if seen[n] {
			return fmt.Errorf("target %q given twice (a --start server is a target of its name)", n)
		}
		seen[n] = true
	}
	if len(seen) == 0 {
		return errors.New("nothing to measure: give --target NAME=URL or --start " + strings.Join(Startable, ","))
	}
	for name := range c.PIDs {
		if !slices.ContainsFunc(c.Targets, func(t Target) bool { return t.Name == name }) {
			if slices.Contains(c.Start, name) {
				return fmt.Errorf("--pids %s: the benchmark starts %s itself and knows its PIDs", name, name)
			}
			return fmt.Errorf("--pids %s: no --target of that name", name)
		}
	}
	if c.Baseline != "" && !seen[c.Baseline] {
		return fmt.Errorf("--baseline %q is not a target (targets: %s)", c.Baseline, strings.Join(c.TargetNames(), ", "))
	}
	if slices.Contains(c.Start, StartKvorum) && c.Executable == "" {
		return errors.New("--start kvorum: no kvorum binary to start")
	}
	return nil
}
