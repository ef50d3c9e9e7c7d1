package resp

import (
	"strconv"
	"strings"
)

// Keys of commands whose key positions COMMAND INFO's first/last/step
// cannot describe: Redis finds them with key specs (a numkeys argument,
// a keyword) or a command's own getkeys procedure. COMMAND GETKEYS
// follows these rules; every other command's keys are first..last by
// step.

// movableKeys returns the keys of argv (the command and its arguments)
// if name has a rule here (ok), and whether the command may have none
// (Redis's CMD_NO_MANDATORY_KEYS: EVAL and FCALL with numkeys 0).
func movableKeys(name string, argv [][]byte) (keys [][]byte, ok, optional bool) {
	switch name {
	case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
		return numKeysAt(argv, 2), true, true
	case "zunionstore", "zinterstore", "zdiffstore":
		if len(argv) < 2 {
			return nil, true, false
		}
		if rest := numKeysAt(argv, 2); rest != nil {
			return append([][]byte{argv[1]}, rest...), true, false
		}
		return nil, true, false
	case "zunion", "zinter", "zdiff", "zintercard", "sintercard", "lmpop", "zmpop":
		return numKeysAt(argv, 1), true, false
	case "blmpop", "bzmpop":
		return numKeysAt(argv, 2), true, false
	case "xread", "xreadgroup":
		for i := 1; i < len(argv); i++ {
			if strings.EqualFold(string(argv[i]), "streams") {
				rest := argv[i+1:]
				return rest[:len(rest)/2], true, false
			}
		}
		return nil, true, false
	case "sort", "sort_ro":
		return sortKeys(argv, name == "sort"), true, false
	case "georadius", "georadiusbymember":
		if len(argv) < 2 {
			return nil, true, false
		}
		keys = [][]byte{argv[1]}
		var store []byte
		for i := 2; i+1 < len(argv); i++ {
			if a := string(argv[i]); strings.EqualFold(a, "store") || strings.EqualFold(a, "storedist") {
				store = argv[i+1]
				i++
			}
		}
		if store != nil {
			keys = append(keys, store)
		}
		return keys, true, false
	case "object", "xinfo":
		// OBJECT ENCODING|FREQ|IDLETIME|REFCOUNT key, XINFO
		// STREAM|GROUPS|CONSUMERS key: the key follows the subcommand.
		if len(argv) > 2 && !strings.EqualFold(string(argv[1]), "help") {
			return argv[2:3], true, false
		}
		return nil, true, false
	}
	return nil, false, false
}

// numKeysAt reads a numkeys argument at argv[at] and returns the keys
// that follow it; nil if it is not a count of keys present.
func numKeysAt(argv [][]byte, at int) [][]byte {
	if at >= len(argv) {
		return nil
	}
	n, err := strconv.Atoi(string(argv[at]))
	if err != nil || n <= 0 || at+1+n > len(argv) {
		return nil
	}
	return argv[at+1 : at+1+n]
}

// sortKeys is SORT's key and, with store, the destination of its last
// STORE option, stepping over the options that take arguments as Redis's
// sortGetKeys does.
func sortKeys(argv [][]byte, store bool) [][]byte {
	if len(argv) < 2 {
		return nil
	}
	keys := [][]byte{argv[1]}
	var dest []byte
	for i := 2; i < len(argv); i++ {
		switch strings.ToLower(string(argv[i])) {
		case "limit":
			i += 2
		case "get", "by":
			i++
		case "store":
			if store && i+1 < len(argv) {
				dest = argv[i+1]
			}
			i++
		}
	}
	if dest != nil {
		keys = append(keys, dest)
	}
	return keys
}
