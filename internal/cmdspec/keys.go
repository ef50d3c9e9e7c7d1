package cmdspec

import (
	"slices"
	"strconv"
	"strings"
)

// Keys of commands whose key positions COMMAND INFO's first/last/step
// cannot describe: Redis finds them with key specs (a numkeys argument,
// a keyword) or a command's own getkeys procedure. COMMAND GETKEYS
// follows these rules; every other command's keys are first..last by
// step.

// MovableKeys returns the positions in argv (the command and its
// arguments) of its keys if name has a rule here (ok), and whether the
// command may have none (Redis's CMD_NO_MANDATORY_KEYS: EVAL and FCALL
// with numkeys 0).
func MovableKeys(name string, argv [][]byte) (keys []int, ok, optional bool) {
	switch name {
	case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
		return numKeyPositions(argv, 2), true, true
	case "zunionstore", "zinterstore", "zdiffstore":
		if rest := numKeyPositions(argv, 2); len(argv) >= 2 && rest != nil {
			return append([]int{1}, rest...), true, false
		}
		return nil, true, false
	case "zunion", "zinter", "zdiff", "zintercard", "sintercard", "lmpop", "zmpop":
		return numKeyPositions(argv, 1), true, false
	case "blmpop", "bzmpop":
		return numKeyPositions(argv, 2), true, false
	case "xread", "xreadgroup":
		for i := 1; i < len(argv); i++ {
			if strings.EqualFold(string(argv[i]), "streams") {
				return span(i+1, (len(argv)-i-1)/2), true, false
			}
		}
		return nil, true, false
	case "sort", "sort_ro":
		return sortKeys(argv, name == "sort"), true, false
	case "georadius", "georadiusbymember":
		if len(argv) < 2 {
			return nil, true, false
		}
		keys, store := []int{1}, 0
		for i := 2; i+1 < len(argv); i++ {
			if a := string(argv[i]); strings.EqualFold(a, "store") || strings.EqualFold(a, "storedist") {
				store = i + 1
				i++
			}
		}
		if store != 0 {
			keys = append(keys, store)
		}
		return keys, true, false
	}
	return nil, false, false
}

// span returns n positions from first.
func span(first, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = first + i
	}
	return out
}

// numKeyPositions reads a numkeys argument at argv[at] and returns the
// positions of the keys that follow it; nil if it is not a count of keys
// present.
func numKeyPositions(argv [][]byte, at int) []int {
	if at >= len(argv) {
		return nil
	}
	n, err := strconv.Atoi(string(argv[at]))
	if err != nil || n <= 0 || at+1+n > len(argv) {
		return nil
	}
	return span(at+1, n)
}

// sortKeys is SORT's key and, with store, the destination of its last
// STORE option, stepping over the options that take arguments as Redis's
// sortGetKeys does.
func sortKeys(argv [][]byte, store bool) []int {
	if len(argv) < 2 {
		return nil
	}
	keys, dest := []int{1}, 0
	for i := 2; i < len(argv); i++ {
		switch strings.ToLower(string(argv[i])) {
		case "limit":
			i += 2
		case "get", "by":
			i++
		case "store":
			if store && i+1 < len(argv) {
				dest = i + 1
			}
			i++
		}
	}
	if dest != 0 {
		keys = append(keys, dest)
	}
	return keys
}

// KeySpec is one of a command's key specifications (COMMAND INFO's
// key_specs; the table is keyspecs_redis.go, generated from redis-server).
type KeySpec struct {
	Notes string // COMMAND INFO shows them
	Flags []string
	// begin_search: an index, or a keyword searched from StartFrom
	// (backwards from the end if negative).
	Index     int
	Keyword   string
	StartFrom int
	// find_keys: a range (LastKey relative to the first key, or from the
	// end if negative; Limit divides what is left) or a key count at
	// KeyNumIdx (relative to the first) followed by the keys from
	// FirstKey; Step between keys. UnknownBegin, UnknownFind: the
	// search cannot be evaluated (the keys depend on the data).
	KeyNum                    bool
	LastKey, Step             int
	Limit                     int
	KeyNumIdx, FirstKey       int
	UnknownBegin, UnknownFind bool
}

// KeyRef is one key found in a command: its position and its flags.
type KeyRef struct {
	Pos   int
	Flags []string
}

// KeysBySpecs finds the keys of argv with specs as Redis's
// getKeysUsingKeySpecs does; ok=false if a spec cannot be evaluated
// (unknown, incomplete) or does not fit argv.
func KeysBySpecs(specs []KeySpec, argv [][]byte) (keys []KeyRef, ok bool) {
	argc := len(argv)
	for _, s := range specs {
		if s.UnknownBegin || s.UnknownFind || slices.Contains(s.Flags, "incomplete") {
			return nil, false
		}
		if slices.Contains(s.Flags, "not_key") {
			continue
		}
		first := s.Index
		if s.Keyword != "" {
			first = 0
			start, end := s.StartFrom, argc-1
			if s.StartFrom < 0 {
				start, end = argc+s.StartFrom, 1
			}
			for i := start; ; {
				if i >= argc || i < 1 {
					break
				}
				if strings.EqualFold(string(argv[i]), s.Keyword) {
					first = i + 1
					break
				}
				if i == end {
					break
				}
				if start <= end {
					i++
				} else {
					i--
				}
			}
			if first == 0 {
				continue // keyword absent: no keys from this spec
			}
		}
		var last int
		step := s.Step
		switch {
		case s.KeyNum:
			if first+s.KeyNumIdx >= argc {
				return nil, false
			}
			n, err := strconv.ParseInt(string(argv[first+s.KeyNumIdx]), 10, 64)
			if err != nil || n < 0 || n > int64(argc) {
				return nil, false
			}
			first += s.FirstKey
			last = first + int(n) - 1
		case s.LastKey >= 0:
			last = first + s.LastKey
		case s.Limit == 0:
			last = argc + s.LastKey
		default:
			last = first + ((argc-first)/s.Limit + s.LastKey)
		}
		if last >= argc || last < first || first >= argc {
			if s.KeyNum && last == first-1 {
				continue // numkeys 0
			}
			return nil, false
		}
		if step <= 0 {
			step = 1
		}
		for i := first; i <= last; i += step {
			keys = append(keys, KeyRef{i, s.Flags})
		}
	}
	return keys, true
}

// KeysWithFlags finds the keys of argv, a command named name (its
// arguments from argv[1]), with their flags, as Redis's
// getKeysFromCommandWithSpecs does: by the key specs when they are
// complete and their flags fixed, else by the command's own procedure.
func KeysWithFlags(name string, argv [][]byte) (keys []KeyRef, optional bool) {
	specs := RedisKeySpecs[name]
	varFlags := slices.ContainsFunc(specs, func(s KeySpec) bool { return slices.Contains(s.Flags, "variable_flags") })
	if len(specs) > 0 && !varFlags {
		if keys, ok := KeysBySpecs(specs, argv); ok {
			_, _, optional = MovableKeys(name, nil)
			return keys, optional
		}
	}
	rw, ro := []string{"RW", "access", "update"}, []string{"RO", "access"}
	switch name {
	case "set": // setGetKeys: GET reads the old value
		if slices.ContainsFunc(argv[min(3, len(argv)):], func(a []byte) bool { return strings.EqualFold(string(a), "get") }) {
			return []KeyRef{{1, rw}}, false
		}
		return []KeyRef{{1, []string{"OW", "update"}}}, false
	case "bitfield": // bitfieldGetKeys: read-only unless SET or INCRBY
		flags := ro
		for _, a := range argv[min(2, len(argv)):] {
			if s := strings.ToLower(string(a)); s == "set" || s == "incrby" {
				flags = rw
			}
		}
		return []KeyRef{{1, flags}}, false
	case "sort", "sort_ro": // sortGetKeys
		found := sortKeys(argv, name == "sort")
		for i, p := range found {
			flags := ro
			if i == 1 {
				flags = []string{"OW", "update"}
			}
			keys = append(keys, KeyRef{p, flags})
		}
		return keys, false
	}
	found, movable, optional := MovableKeys(name, argv)
	if !movable {
		return nil, false
	}
	for _, p := range found {
		keys = append(keys, KeyRef{p, nil})
	}
	return keys, optional
}

// keyContainers are the commands with subcommands that have keys
// (OBJECT, XGROUP, XINFO, ...): their keys are the subcommand's.
var keyContainers = func() map[string]bool {
	m := map[string]bool{}
	for name := range RedisKeySpecs {
		if c, _, ok := strings.Cut(name, "|"); ok {
			m[c] = true
		}
	}
	return m
}()

// KeySubcommand returns the name whose key specs apply to argv, a
// command named name: "container|sub" for a subcommand of a container
// with keys, else name.
func KeySubcommand(name string, argv [][]byte) string {
	if keyContainers[name] && len(argv) > 1 {
		return name + "|" + strings.ToLower(string(argv[1]))
	}
	return name
}

// HasKeys reports whether argv (the command and its arguments), a
// command with spec sp, has key arguments at all (COMMAND GETKEYS's first
// check): Redis's key specs or key procedure, or sp's first key for
// kvorum's own commands.
func HasKeys(sp *Spec, argv [][]byte) bool {
	name := KeySubcommand(sp.Name, argv)
	_, movable, _ := MovableKeys(name, nil)
	return movable || (sp.FirstKey > 0 && name == sp.Name) || RedisKeySpecs[name] != nil
}

// KeyRefs finds the keys of argv (the command and its arguments), a
// command with spec sp whose arity the caller checked, as COMMAND
// GETKEYSANDFLAGS does: by Redis's key specs and key procedures for
// Redis's commands (KeysWithFlags), by sp's first/last/step for
// kvorum's own. optional: the command may have no key (EVAL with
// numkeys 0).
func KeyRefs(sp *Spec, argv [][]byte) (keys []KeyRef, optional bool) {
	if !HasKeys(sp, argv) {
		return nil, false
	}
	name := KeySubcommand(sp.Name, argv)
	if _, movable, _ := MovableKeys(name, nil); movable || RedisKeySpecs[name] != nil {
		return KeysWithFlags(name, argv)
	}
	// kvorum's own commands: first..last by step
	first, last, step := sp.FirstKey, sp.LastKey, sp.Step
	if last < 0 {
		last = len(argv) + last
	}
	flags := []string{"RO", "access"}
	if sp.Write {
		flags = []string{"RW", "update"}
	}
	for i := first; i <= last && i < len(argv); i += max(step, 1) {
		keys = append(keys, KeyRef{i, flags})
	}
	return keys, false
}

// Keys returns the keys of argv, a command with spec sp, as COMMAND
// GETKEYS finds them (KeyRefs), appended to dst: routing and the range
// check at apply (kv's rangecheck.go) use it, so they and COMMAND GETKEYS
// cannot disagree.
func Keys(dst [][]byte, sp *Spec, argv [][]byte) [][]byte {
	refs, _ := KeyRefs(sp, argv)
	for _, r := range refs {
		dst = append(dst, argv[r.Pos])
	}
	return dst
}
