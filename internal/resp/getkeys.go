package resp

import (
	"slices"

	"github.com/kvorum/kvorum/internal/reply"
	"strconv"
	"strings"
)

// Keys of commands whose key positions COMMAND INFO's first/last/step
// cannot describe: Redis finds them with key specs (a numkeys argument,
// a keyword) or a command's own getkeys procedure. COMMAND GETKEYS
// follows these rules; every other command's keys are first..last by
// step.

// movableKeys returns the positions in argv (the command and its
// arguments) of its keys if name has a rule here (ok), and whether the
// command may have none (Redis's CMD_NO_MANDATORY_KEYS: EVAL and FCALL
// with numkeys 0).
func movableKeys(name string, argv [][]byte) (keys []int, ok, optional bool) {
	switch name {
	case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
		return numKeysAt(argv, 2), true, true
	case "zunionstore", "zinterstore", "zdiffstore":
		if rest := numKeysAt(argv, 2); len(argv) >= 2 && rest != nil {
			return append([]int{1}, rest...), true, false
		}
		return nil, true, false
	case "zunion", "zinter", "zdiff", "zintercard", "sintercard", "lmpop", "zmpop":
		return numKeysAt(argv, 1), true, false
	case "blmpop", "bzmpop":
		return numKeysAt(argv, 2), true, false
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

// numKeysAt reads a numkeys argument at argv[at] and returns the
// positions of the keys that follow it; nil if it is not a count of keys
// present.
func numKeysAt(argv [][]byte, at int) []int {
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

// keySpec is one of a command's key specifications (COMMAND INFO's
// key_specs; the table is keyspecs_redis.go, generated from redis-server).
type keySpec struct {
	notes string // COMMAND INFO shows them
	flags []string
	// begin_search: an index, or a keyword searched from startFrom
	// (backwards from the end if negative).
	index     int
	keyword   string
	startFrom int
	// find_keys: a range (lastKey relative to the first key, or from the
	// end if negative; limit divides what is left) or a key count at
	// keyNumIdx (relative to the first) followed by the keys from
	// firstKey; step between keys. unknownBegin, unknownFind: the
	// search cannot be evaluated (the keys depend on the data).
	keyNum                    bool
	lastKey, step             int
	limit                     int
	keyNumIdx, firstKey       int
	unknownBegin, unknownFind bool
}

// keyRef is one key found in a command: its position and its flags.
type keyRef struct {
	pos   int
	flags []string
}

// keysBySpecs finds the keys of argv with specs as Redis's
// getKeysUsingKeySpecs does; ok=false if a spec cannot be evaluated
// (unknown, incomplete) or does not fit argv.
func keysBySpecs(specs []keySpec, argv [][]byte) (keys []keyRef, ok bool) {
	argc := len(argv)
	for _, s := range specs {
		if s.unknownBegin || s.unknownFind || slices.Contains(s.flags, "incomplete") {
			return nil, false
		}
		if slices.Contains(s.flags, "not_key") {
			continue
		}
		first := s.index
		if s.keyword != "" {
			first = 0
			start, end := s.startFrom, argc-1
			if s.startFrom < 0 {
				start, end = argc+s.startFrom, 1
			}
			for i := start; ; {
				if i >= argc || i < 1 {
					break
				}
				if strings.EqualFold(string(argv[i]), s.keyword) {
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
		step := s.step
		switch {
		case s.keyNum:
			if first+s.keyNumIdx >= argc {
				return nil, false
			}
			n, err := strconv.ParseInt(string(argv[first+s.keyNumIdx]), 10, 64)
			if err != nil || n < 0 || n > int64(argc) {
				return nil, false
			}
			first += s.firstKey
			last = first + int(n) - 1
		case s.lastKey >= 0:
			last = first + s.lastKey
		case s.limit == 0:
			last = argc + s.lastKey
		default:
			last = first + ((argc-first)/s.limit + s.lastKey)
		}
		if last >= argc || last < first || first >= argc {
			if s.keyNum && last == first-1 {
				continue // numkeys 0
			}
			return nil, false
		}
		if step <= 0 {
			step = 1
		}
		for i := first; i <= last; i += step {
			keys = append(keys, keyRef{i, s.flags})
		}
	}
	return keys, true
}

// keysWithFlags finds the keys of argv, a command named name (its
// arguments from argv[1]), with their flags, as Redis's
// getKeysFromCommandWithSpecs does: by the key specs when they are
// complete and their flags fixed, else by the command's own procedure.
func keysWithFlags(name string, argv [][]byte) (keys []keyRef, optional bool) {
	specs := redisKeySpecs[name]
	varFlags := slices.ContainsFunc(specs, func(s keySpec) bool { return slices.Contains(s.flags, "variable_flags") })
	if len(specs) > 0 && !varFlags {
		if keys, ok := keysBySpecs(specs, argv); ok {
			_, _, optional = movableKeys(name, nil)
			return keys, optional
		}
	}
	rw, ro := []string{"RW", "access", "update"}, []string{"RO", "access"}
	switch name {
	case "set": // setGetKeys: GET reads the old value
		if slices.ContainsFunc(argv[min(3, len(argv)):], func(a []byte) bool { return strings.EqualFold(string(a), "get") }) {
			return []keyRef{{1, rw}}, false
		}
		return []keyRef{{1, []string{"OW", "update"}}}, false
	case "bitfield": // bitfieldGetKeys: read-only unless SET or INCRBY
		flags := ro
		for _, a := range argv[min(2, len(argv)):] {
			if s := strings.ToLower(string(a)); s == "set" || s == "incrby" {
				flags = rw
			}
		}
		return []keyRef{{1, flags}}, false
	case "sort", "sort_ro": // sortGetKeys
		found := sortKeys(argv, name == "sort")
		for i, p := range found {
			flags := ro
			if i == 1 {
				flags = []string{"OW", "update"}
			}
			keys = append(keys, keyRef{p, flags})
		}
		return keys, false
	}
	found, movable, optional := movableKeys(name, argv)
	if !movable {
		return nil, false
	}
	for _, p := range found {
		keys = append(keys, keyRef{p, nil})
	}
	return keys, optional
}

// keyContainers are the commands with subcommands that have keys
// (OBJECT, XGROUP, XINFO, ...): their keys are the subcommand's.
var keyContainers = func() map[string]bool {
	m := map[string]bool{}
	for name := range redisKeySpecs {
		if c, _, ok := strings.Cut(name, "|"); ok {
			m[c] = true
		}
	}
	return m
}()

// keySubcommand returns the name whose key specs apply to argv, a
// command named name: "container|sub" for a subcommand of a container
// with keys, else name.
func keySubcommand(name string, argv [][]byte) string {
	if keyContainers[name] && len(argv) > 1 {
		return name + "|" + strings.ToLower(string(argv[1]))
	}
	return name
}

// reply is the key spec as COMMAND INFO shows it.
func (s keySpec) reply() reply.Reply {
	str, num := reply.BulkString, func(n int) reply.Reply { return reply.Int(int64(n)) }
	typed := func(typ string, kvs ...reply.Reply) reply.Reply {
		return reply.Map(str("type"), str(typ), str("spec"), reply.Map(kvs...))
	}
	begin := typed("index", str("index"), num(s.index))
	switch {
	case s.unknownBegin:
		begin = typed("unknown")
	case s.keyword != "":
		begin = typed("keyword", str("keyword"), str(s.keyword), str("startfrom"), num(s.startFrom))
	}
	find := typed("range", str("lastkey"), num(s.lastKey), str("keystep"), num(s.step), str("limit"), num(s.limit))
	switch {
	case s.unknownFind:
		find = typed("unknown")
	case s.keyNum:
		find = typed("keynum", str("keynumidx"), num(s.keyNumIdx), str("firstkey"), num(s.firstKey), str("keystep"), num(s.step))
	}
	var kvs []reply.Reply
	if s.notes != "" {
		kvs = append(kvs, str("notes"), str(s.notes))
	}
	kvs = append(kvs, str("flags"), statusSet(s.flags), str("begin_search"), begin, str("find_keys"), find)
	return reply.Map(kvs...)
}
