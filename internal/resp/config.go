package resp

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/kvorum/kvorum/internal/glob"
	"github.com/kvorum/kvorum/internal/notify"
	"github.com/kvorum/kvorum/internal/redisnum"
	"github.com/kvorum/kvorum/internal/reply"
)

// CONFIG GET / SET / RESETSTAT / REWRITE / HELP.
//
// Tools and test programs call CONFIG GET at start-up (redis-benchmark
// asks for "save" and "appendonly" and warns on every run when refused),
// so every parameter below answers with what is true of this node, under
// Redis's name. Few can be changed: CONFIG SET takes effect on the node
// that receives it, as Redis's does on its one server, for the
// parameters kvorum can change at run time; the others answer Redis's
// own error format with the reason. Parameters that kvorum does not
// know at all answer as in Redis ("Unknown option"); CONFIG GET of them
// matches nothing.

// configParam is one parameter: its value now, and how to change it
// (set nil: it cannot be, for the reason in fixed).
type configParam struct {
	name  string
	get   func(s *Server) string
	set   func(s *Server, v string) (apply func(), err string)
	fixed string
	// cluster: the parameter is the cluster's, kept in the replicated
	// state machine (kv's KVORUM.CONFIG) under the name canon if set (a
	// Redis alias), else name: get and set are not used, check validates a
	// value and returns it as kv stores it, or the reason it is refused.
	cluster bool
	check   func(v string) (norm, why string)
	canon   string
}

// Reasons a parameter cannot be changed (the text after "- " in Redis's
// "CONFIG SET failed (possibly related to argument 'x') - ..." error).
const (
	fixedImmutable  = "can't set immutable config"
	fixedTLSFiles   = "kvorum re-reads the certificate files when they change: replace the files' contents instead"
	fixedDurability = "kvorum's durability is not configurable: every acknowledged write is in the Raft log, fsynced on a majority of nodes"
)

// configParams is the table, in the order CONFIG GET * answers.
var configParams = []configParam{
	{name: "appendfsync", get: constant("always"), fixed: fixedDurability},
	{name: "appendonly", get: constant("yes"), fixed: fixedDurability},
	{name: "bind", get: func(s *Server) string { return s.bindHost() }, fixed: fixedImmutable},
	{name: "busy-reply-threshold", get: getBusyThreshold, set: setBusyThreshold},
	{name: "databases", get: constant("1"), fixed: fixedImmutable},
	{name: "hash-max-listpack-entries", cluster: true, check: checkCount},
	{name: "hash-max-listpack-value", cluster: true, check: checkMemory},
	{name: "hash-max-ziplist-entries", cluster: true, check: checkCount, canon: "hash-max-listpack-entries"},
	{name: "hash-max-ziplist-value", cluster: true, check: checkMemory, canon: "hash-max-listpack-value"},
	{name: "latency-monitor-threshold", get: getLatencyThreshold, set: setLatencyThreshold},
	{name: "latency-tracking", get: getLatencyTracking, set: setLatencyTracking},
	{name: "latency-tracking-info-percentiles", get: getLatencyPercentiles, set: setLatencyPercentiles},
	{name: "lua-time-limit", get: getBusyThreshold, set: setBusyThreshold},
	{name: "maxclients", get: func(s *Server) string { return strconv.FormatInt(s.maxClients.Load(), 10) }, set: setMaxClients},
	{name: "maxmemory", cluster: true, check: checkMemory},
	{name: "maxmemory-policy", get: constant("noeviction"), set: setMaxMemoryPolicy},
	{name: notify.Param, cluster: true, check: checkNotify},
	{name: "port", get: func(s *Server) string { return strconv.FormatInt(s.port.Load(), 10) }, fixed: fixedImmutable},
	{name: "proto-max-bulk-len", get: getMaxBulkLen, set: setMaxBulkLen},
	{name: "save", get: constant(""), fixed: fixedDurability},
	{name: "set-max-intset-entries", cluster: true, check: checkCount},
	{name: "slowlog-log-slower-than", get: getSlowlogSlowerThan, set: setSlowlogSlowerThan},
	{name: "slowlog-max-len", get: getSlowlogMaxLen, set: setSlowlogMaxLen},
	{name: "stream-node-max-bytes", cluster: true, check: checkMemory},
	{name: "stream-node-max-entries", cluster: true, check: checkCount},
	{name: "timeout", get: func(s *Server) string { return strconv.FormatInt(s.idleTimeout.Load(), 10) }, set: setTimeout},
	{name: "tls-auth-clients", get: func(s *Server) string { return s.cfg.TLS.AuthClients }, fixed: fixedImmutable},
	{name: "tls-ca-cert-file", get: func(s *Server) string { return s.cfg.TLS.CAFile }, fixed: fixedTLSFiles},
	{name: "tls-cert-file", get: func(s *Server) string { return s.cfg.TLS.CertFile }, fixed: fixedTLSFiles},
	{name: "tls-key-file", get: func(s *Server) string { return s.cfg.TLS.KeyFile }, fixed: fixedTLSFiles},
	{name: "tls-port", get: func(s *Server) string { return strconv.FormatInt(s.tlsPort.Load(), 10) }, fixed: fixedImmutable},
	{name: "zset-max-listpack-entries", cluster: true, check: checkCount},
	{name: "zset-max-listpack-value", cluster: true, check: checkMemory},
	{name: "zset-max-ziplist-entries", cluster: true, check: checkCount, canon: "zset-max-listpack-entries"},
	{name: "zset-max-ziplist-value", cluster: true, check: checkMemory, canon: "zset-max-listpack-value"},
}

func checkNotify(v string) (string, string) {
	if _, ok := notify.Parse(v); !ok {
		return "", "Invalid event class character. Use 'Ag$lshzxeKEtmdn'."
	}
	return v, ""
}

const errBetween = "argument must be between 0 and 9223372036854775807 inclusive"

// checkCount takes what Redis's integer size_t parameters do: string2ll,
// 0 to LONG_MAX.
func checkCount(v string) (string, string) {
	n, ok := redisnum.ParseInt([]byte(v))
	if !ok {
		return "", "argument couldn't be parsed into an integer"
	}
	if n < 0 {
		return "", errBetween
	}
	return v, ""
}

// memUnits are the units of Redis's memtoull.
var memUnits = map[string]uint64{"": 1, "b": 1, "k": 1000, "kb": 1024, "m": 1000 * 1000, "mb": 1 << 20, "g": 1000 * 1000 * 1000, "gb": 1 << 30}

// checkMemory takes what Redis's memory size_t parameters do (memtoull):
// digits, possibly none, then a unit, 0 to LONG_MAX bytes.
func checkMemory(v string) (string, string) {
	i := 0
	for i < len(v) && v[i] >= '0' && v[i] <= '9' {
		i++
	}
	mul, ok := memUnits[strings.ToLower(v[i:])]
	if !ok || i >= 128 {
		return "", "argument must be a memory value"
	}
	// Too many digits: the maximum, as strtoull; the product wraps around
	// as in Redis 7.0.
	n, _ := strconv.ParseUint(v[:i], 10, 64)
	if n *= mul; n > math.MaxInt64 {
		return "", errBetween
	}
	return strconv.FormatUint(n, 10), ""
}

// clusterConfig runs a KVORUM.CONFIG command (GET name, or SET name
// value ...) through the backend: a linearizable read, or one Raft entry.
func clusterConfig(c *conn, args ...[]byte) reply.Reply {
	return c.s.b.Do(c.ctx, [][][]byte{append([][]byte{[]byte("KVORUM.CONFIG")}, args...)})[0]
}

// bindHost is the address the node's client port listens on.
func (s *Server) bindHost() string {
	if p := s.bind.Load(); p != nil {
		return *p
	}
	return ""
}

func constant(v string) func(*Server) string { return func(*Server) string { return v } }

// evictionPolicies are Redis's maxmemory-policy values but noeviction.
var evictionPolicies = []string{"volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl", "allkeys-lru", "allkeys-lfu", "allkeys-random"}

// setMaxMemoryPolicy accepts noeviction, the one policy kvorum has (see
// maxmemory.go); an eviction policy is refused saying why, anything else
// as Redis refuses an unknown enum value.
func setMaxMemoryPolicy(_ *Server, v string) (func(), string) {
	switch {
	case strings.EqualFold(v, "noeviction"):
		return func() {}, ""
	case slices.ContainsFunc(evictionPolicies, func(p string) bool { return strings.EqualFold(p, v) }):
		return nil, "kvorum does not evict keys (its data lives on disk): only noeviction is supported, and writes that add data are refused over maxmemory"
	}
	return nil, "argument(s) must be one of the following: " + strings.Join(evictionPolicies, ", ") + ", noeviction"
}

func setMaxClients(s *Server, v string) (func(), string) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil, "argument couldn't be parsed into an integer"
	}
	if n < 1 || n > 1<<32-1 {
		return nil, "argument must be between 1 and 4294967295 inclusive"
	}
	return func() { s.maxClients.Store(n) }, ""
}

// kvName is a cluster parameter's name in kv.
func (p *configParam) kvName() string {
	if p.canon != "" {
		return p.canon
	}
	return p.name
}

func setTimeout(s *Server, v string) (func(), string) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil, "argument couldn't be parsed into an integer"
	}
	if n < 0 || n > 1<<31-1 {
		return nil, "argument must be between 0 and 2147483647 inclusive"
	}
	return func() { s.idleTimeout.Store(n) }, ""
}

// busy-reply-threshold and its alias lua-time-limit (busy.go): Redis's
// integer parameter, 0 to LLONG_MAX milliseconds.
func getBusyThreshold(s *Server) string { return strconv.FormatInt(s.busyThreshold.Load(), 10) }

func setBusyThreshold(s *Server, v string) (func(), string) {
	if _, why := checkCount(v); why != "" {
		return nil, why
	}
	n, _ := redisnum.ParseInt([]byte(v))
	return func() { s.busyThreshold.Store(n) }, ""
}

func findConfigParam(name string) *configParam {
	for i := range configParams {
		if strings.EqualFold(configParams[i].name, name) {
			return &configParams[i]
		}
	}
	return nil
}

// configCommand is the CONFIG container.
func configCommand() *command {
	adminFlags := []string{"admin", "noscript", "loading", "stale"}
	adminACL := []string{"@admin", "@slow", "@dangerous"}
	sub := func(name string, arity int, flags, acl []string, since, summary string, h func(c *conn, args [][]byte) reply.Reply) *command {
		return connCmd("config|"+name, arity, flags, acl, since, summary, h)
	}
	cfg := connCmd("config", -2, nil, []string{"@slow"}, "2.0.0", "A container for server configuration commands", nil)
	cfg.subs = []*command{
		sub("get", -3, adminFlags, adminACL, "2.0.0", "Returns the effective values of configuration parameters", configGet),
		sub("set", -4, adminFlags, adminACL, "2.0.0", "Sets configuration parameters in-flight", configSet),
		sub("resetstat", 2, adminFlags, adminACL, "2.0.0", "Resets the server's statistics", configResetStat),
		sub("rewrite", 2, adminFlags, adminACL, "2.8.0", "Persists the effective configuration to file", configRewrite),
		sub("help", 2, []string{"loading", "stale"}, []string{"@slow"}, "5.0.0", "Returns helpful text about the different subcommands", configHelp),
	}
	// As Redis's: a cluster client sends CONFIG SET to every node (here
	// too it changes only the node that receives it).
	cfg.subs[1].tips = []string{"request_policy:all_nodes", "response_policy:all_succeeded"}
	cfg.handler = containerHandler(cfg)
	cfg.spec.Group = "server"
	for _, sc := range cfg.subs {
		sc.spec.Group = "server"
	}
	return cfg
}

// configGet answers the parameters matching any of the patterns (glob,
// case-insensitive), each once: a map in RESP3, name/value pairs in RESP2.
func configGet(c *conn, args [][]byte) reply.Reply {
	var kvs []reply.Reply
	for _, p := range configParams {
		for _, pat := range args[2:] {
			if glob.Match(pat, []byte(p.name), true) {
				name := p.name
				if !isGlob(pat) {
					name = string(pat) // as Redis: an exact name comes back as given
				}
				v := reply.BulkString("")
				if p.cluster {
					if v = clusterConfig(c, []byte("GET"), []byte(p.kvName())); v.Kind == reply.KindError {
						return v
					}
				} else {
					v = reply.BulkString(p.get(c.s))
				}
				kvs = append(kvs, reply.BulkString(name), v)
				break
			}
		}
	}
	return reply.Map(kvs...)
}

// isGlob reports whether pat has a glob special character.
func isGlob(pat []byte) bool { return strings.ContainsAny(string(pat), "*?[\\") }

// configSet sets every parameter named, or none: all are checked first
// (Redis 7's atomic CONFIG SET of several parameters).
func configSet(c *conn, args [][]byte) reply.Reply {
	if len(args)%2 != 0 {
		return reply.Error("ERR syntax error") // as Redis: the arity check let an odd count >= 4 through
	}
	var applies []func()
	cluster := [][]byte{[]byte("SET")}
	seen := map[string]bool{}
	for i := 2; i < len(args); i += 2 {
		name, val := string(args[i]), string(args[i+1])
		p := findConfigParam(name)
		if p == nil {
			return reply.Error("ERR Unknown option or number of arguments for CONFIG SET - '" + name + "'")
		}
		if seen[p.name] {
			return configSetFailed(name, "duplicate parameter")
		}
		seen[p.name] = true
		if p.cluster {
			norm, why := p.check(val)
			if why != "" {
				return configSetFailed(name, why)
			}
			cluster = append(cluster, []byte(p.kvName()), []byte(norm))
			continue
		}
		if p.set == nil {
			if p.fixed == fixedDurability && strings.EqualFold(val, p.get(c.s)) {
				continue // setting the value it has changes nothing
			}
			return configSetFailed(name, p.fixed)
		}
		apply, why := p.set(c.s, val)
		if why != "" {
			return configSetFailed(name, why)
		}
		applies = append(applies, apply)
	}
	if len(cluster) > 1 {
		if r := clusterConfig(c, cluster...); r.Kind == reply.KindError {
			return r // nothing changed: the node-local parameters are set after
		}
	}
	for _, apply := range applies {
		apply()
	}
	return reply.Status("OK")
}

func configSetFailed(name, why string) reply.Reply {
	return reply.Error("ERR CONFIG SET failed (possibly related to argument '" + name + "') - " + why)
}

// configResetStat zeroes INFO's counters (stats, commandstats,
// errorstats) and the commands' latency histograms, as Redis's
// resetServerStats and resetCommandTableStats do for theirs (the /metrics
// counters are not reset: they are cumulative by Prometheus's rules). As
// in Redis, SLOWLOG and LATENCY's events are not reset.
func configResetStat(c *conn, args [][]byte) reply.Reply {
	s := c.s
	s.totalConns.Store(0)
	s.totalCmds.Store(0)
	s.rejected.Store(0)
	s.protoErrs.Store(0)
	s.netIn.Store(0)
	s.netOut.Store(0)
	s.resetCommandStats()
	return reply.Status("OK")
}

// configRewrite: kvorum is configured by its flags, not a file.
func configRewrite(c *conn, args [][]byte) reply.Reply {
	return reply.Error("ERR The server is running without a config file")
}

func configHelp(c *conn, args [][]byte) reply.Reply {
	return helpReply("CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"GET <pattern>",
		"    Return parameters matching the glob-like <pattern> and their values.",
		"SET <directive> <value>",
		"    Set the configuration <directive> to <value>.",
		"RESETSTAT",
		"    Reset statistics reported by the INFO command.",
		"REWRITE",
		"    Rewrite the configuration file.",
		"HELP",
		"    Prints this help.")
}

// getMaxBulkLen is proto-max-bulk-len: the value CONFIG SET gave, else
// the limit the node started with (Redis's default, 512mb, unless the
// frame limit, --max-frame-size, is lower: a bulk cannot exceed a frame).
func getMaxBulkLen(s *Server) string {
	if n := s.maxBulkLen.Load(); n > 0 {
		return strconv.FormatInt(n, 10)
	}
	return strconv.Itoa(s.startBulkLen())
}

// startBulkLen is the bulk limit of the node's start-up configuration.
func (s *Server) startBulkLen() int {
	return s.cfg.Limits.WithDefaults().MaxBulkLen
}

// setMaxBulkLen takes what Redis's proto-max-bulk-len does (a memory
// value of at least 1mb); it applies to the bulks read from then on, by
// every connection of the node, up to the frame limit.
func setMaxBulkLen(s *Server, v string) (func(), string) {
	norm, why := checkMemory(v)
	if why != "" {
		return nil, why
	}
	n, _ := strconv.ParseInt(norm, 10, 64)
	if n < 1<<20 {
		return nil, "argument must be between 1048576 and 9223372036854775807 inclusive"
	}
	return func() { s.maxBulkLen.Store(n) }, ""
}
