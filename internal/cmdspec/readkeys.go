package cmdspec

import (
	"strconv"
	"strings"
)

// ReadKeys returns how to find the keys that write command name (lower
// case) looks up for reading before it writes, as Redis does
// (lookupKeyRead: they count in keyspace_hits/keyspace_misses and a
// missing one is a keymiss event), in Redis's order; nil if the command
// reads no key so. The keys a write command only writes, or looks up for
// writing, are not listed.
func ReadKeys(name string) func(args [][]byte) [][]byte {
	return readKeys[name]
}

var readKeys = map[string]func(args [][]byte) [][]byte{
	"getdel": firstKey, "getex": firstKey, "getset": firstKey, "copy": firstKey,
	"set": func(args [][]byte) [][]byte {
		for _, a := range args[3:] {
			if strings.EqualFold(string(a), "GET") {
				return args[1:2]
			}
		}
		return nil
	},
	"sunionstore": keysFrom(2), "sinterstore": keysFrom(2), "sdiffstore": keysFrom(2),
	"bitop": keysFrom(3), "pfmerge": keysFrom(1),
	"zunionstore": numKeysAt(2), "zinterstore": numKeysAt(2), "zdiffstore": numKeysAt(2),
	"zrangestore": secondKey, "geosearchstore": secondKey,
	"sort": firstKey, "georadius": firstKey, "georadiusbymember": firstKey,
}

func firstKey(args [][]byte) [][]byte  { return args[1:2] }
func secondKey(args [][]byte) [][]byte { return args[2:3] }

func keysFrom(i int) func([][]byte) [][]byte {
	return func(args [][]byte) [][]byte { return args[i:] }
}

// numKeysAt: numkeys at args[i], the keys after it.
func numKeysAt(i int) func([][]byte) [][]byte {
	return func(args [][]byte) [][]byte {
		n, err := strconv.Atoi(string(args[i]))
		if err != nil || n < 0 || i+1+n > len(args) {
			return nil
		}
		return args[i+1 : i+1+n]
	}
}
