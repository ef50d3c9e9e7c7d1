package cmdspec

import (
	"slices"
	"strings"
)

// Redis commands kvorum knows about but does not implement answer with why,
// instead of Redis's generic "unknown command".
var unsupported = map[string]string{}

func init() {
	add := func(reason string, names ...string) {
		for _, n := range names {
			unsupported[n] = reason
		}
	}
	add("it moves keys between Redis servers; move them with DUMP and RESTORE, or import an RDB file with `kvorum import`",
		"migrate")
	add("kvorum is not a Redis Cluster; use RESTORE", "restore-asking")
	add("kvorum has a single database (0)", "move", "swapdb")
	add("persistence is always on: every acknowledged write is fsynced on a majority",
		"save", "bgsave", "bgrewriteaof", "lastsave", "wait", "waitaof")
	add("replication is Raft's; use `kvorum ctl` to manage members",
		"replicaof", "slaveof", "sync", "psync", "failover")
	add("kvorum does not expose server internals through this command; see /metrics on the admin port",
		"debug", "pfdebug", "pfselftest", "monitor", "module", "memory", "shutdown", "lolwut")
	// SLOWLOG is answered by the node a client is connected to (package
	// resp), not inside a script, which runs at apply time on every
	// replica (LATENCY is refused in scripts as Redis refuses it).
	add("SLOWLOG is the node's and answers a client, not a script: scripts run at apply time on every replica",
		"slowlog")
}

// Unsupported returns why kvorum does not implement the Redis command
// name (any case), ok=false if it is not one of those.
func Unsupported(name string) (reason string, ok bool) {
	reason, ok = unsupported[strings.ToLower(name)]
	return reason, ok
}

// UnsupportedNames lists the commands Unsupported knows, sorted.
func UnsupportedNames() []string {
	names := make([]string, 0, len(unsupported))
	for n := range unsupported {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
