package kv

// EachKey calls fn for every key args declares, with the keys of the
// commands it wraps (KVORUM.EXEC, KVORUM.AS, ...), exactly the keys the
// range check at apply tests (keysInRange), until fn returns false. It
// reports whether args is a command it could look into (false for an
// unknown command or a wrong arity: routing sends those anywhere, where
// they fail with their usual error). Routing uses it (server/router.go).
func EachKey(args [][]byte, fn func(k []byte) bool) bool {
	if len(args) == 0 {
		return false
	}
	d := lookup(args[0])
	if d == nil || !arityOK(&d.spec, args) {
		return false
	}
	declaredKeys(d, args, fn, 0)
	return true
}
