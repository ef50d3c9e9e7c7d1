// Package cmdspec describes commands as Redis's COMMAND reports them: the
// shape every command table in kvorum shares. Package kv owns the data
// commands' specs (kv.Commands); package resp adds the connection commands
// and answers COMMAND, COMMAND INFO and COMMAND DOCS from them. Keys
// (keys.go) finds a command's keys from Redis's key specs
// (keyspecs_redis.go): COMMAND GETKEYS, the ACL key checks and kv's range
// check at apply use it. It depends on nothing.
package cmdspec

// Spec describes one command.
type Spec struct {
	Name                    string   // lower case, as COMMAND reports it
	Arity                   int      // Redis convention: N exact, -N at least N (with the name)
	Flags                   []string // Redis COMMAND flags
	FirstKey, LastKey, Step int      // key positions as COMMAND INFO reports them
	Write                   bool     // true: replicated through Raft (Apply); false: Read
	Group                   string   // for COMMAND DOCS
	Summary                 string   // one line, for COMMAND DOCS
	Extension               bool     // kvorum's own command (LEASE, LOCK), not a Redis one
}
