package kv

import "slices"

// maxmemory and scripts. The node refuses denyoom commands over maxmemory
// before proposing them (package resp); a script is proposed as usual, but
// whether it may call a denyoom command depends on the node's data set
// when it was received, which the replicas must agree on: so a node over
// maxmemory proposes EVAL, EVALSHA and FCALL wrapped as KVORUM.OOM <the
// command>, and every replica then applies Redis's rules (script.c's
// scriptVerifyOOM, scriptFlagsToCmdFlags):
//
//   - a script or function whose flags say it may write (a "#!lua" shebang
//     or registered flags, without no-writes or allow-oom) is refused;
//   - in a script without flags, redis.call of a denyoom command is
//     refused with the OOM error until the run has called a write command
//     (after that, Redis does not stop it halfway).

// errOOM is Redis's shared.oomerr.
var errOOM = Error("OOM command not allowed when used memory > 'maxmemory'.")

func init() {
	def("kvorum.oom", -2, "write", 0, 0, 0, "server", "Internal: runs a script command proposed while the node was over maxmemory.", cmdOOM, nil)
	table["kvorum.oom"].internal = true
	specList = specList[:len(specList)-1] // internal: not in COMMAND
}

// OOMScript reports whether args is a command that a node over maxmemory
// proposes wrapped as KVORUM.OOM (OOMWrap).
func OOMScript(args [][]byte) bool {
	d := lookup(args[0])
	return d != nil && (d.spec.Name == "eval" || d.spec.Name == "evalsha" || d.spec.Name == "fcall")
}

// OOMWrap returns args wrapped as KVORUM.OOM.
func OOMWrap(args [][]byte) [][]byte {
	return append([][]byte{[]byte("KVORUM.OOM")}, args...)
}

func cmdOOM(x *ctx, args [][]byte) Reply {
	inner := args[1:]
	if !OOMScript(inner) {
		return Error("ERR internal: KVORUM.OOM of a command that is not a script")
	}
	d := lookup(inner[0])
	if r, ok := validate(d, inner); !ok {
		return r
	}
	x.oom = true
	return d.run(x, inner)
}

// denyOOM reports whether Redis flags the command denyoom.
func (d *cmdDef) denyOOM() bool { return slices.Contains(d.spec.Flags, "denyoom") }

// OOMWrap is resp's oomWrapper: args as a node over maxmemory proposes
// it (wrapped as KVORUM.OOM if it is a script command), else args.
func (Table) OOMWrap(args [][]byte) [][]byte {
	if OOMScript(args) {
		return OOMWrap(args)
	}
	return args
}
