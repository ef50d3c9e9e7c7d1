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

// Exec is EncodeExec.
func (Table) Exec(keys [][]byte, stamps []uint64, cmds [][][]byte) [][]byte {
	return EncodeExec(keys, stamps, cmds)
}
