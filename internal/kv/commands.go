package kv

// Table is the data-command table as the client protocol layer sees it:
// introspection, validation with the node's size limits, and the encoding
// of a transaction. It satisfies resp.Commands; package kv does not import
// resp, the shapes simply agree.
type Table struct{ Limits Limits }

// Specs returns every client-visible Spec.
func (Table) Specs() []*Spec { return specList }

// Known reports whether name is a client-visible data command.
func (Table) Known(name []byte) bool { return Lookup(name) != nil }

// Check is Check with t's limits.
func (t Table) Check(args [][]byte) (Reply, bool) { return Check(args, t.Limits) }

// CheckQueued is CheckQueued with t's limits.
func (t Table) CheckQueued(args [][]byte) (Reply, bool) { return CheckQueued(args, t.Limits) }

// Blocks is Blocks.
func (Table) Blocks(args [][]byte) bool { return Blocks(args) }

// Unsupported is Unsupported.
func (Table) Unsupported(name []byte) (Reply, bool) { return Unsupported(name) }

// Exec builds the KVORUM.EXEC command of a transaction: keys[i] was
// watched at stamps[i]; cmds are the queued data commands.
func (Table) Exec(keys [][]byte, stamps []uint64, cmds [][][]byte) [][]byte {
	w := make([]WatchedKey, len(keys))
	for i := range keys {
		w[i] = WatchedKey{Key: keys[i], Stamp: stamps[i]}
	}
	return EncodeExec(w, cmds)
}
