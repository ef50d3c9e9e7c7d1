// Package argtest holds the helpers the tests of the argument-parsing
// packages (listargs, lockargs, stringargs, zsetargs) share.
package argtest

import "strings"

// Fields splits s at spaces into a command's arguments.
func Fields(s string) [][]byte {
	var out [][]byte
	for _, f := range strings.Fields(s) {
		out = append(out, []byte(f))
	}
	return out
}

// ErrText is the error text a parser gave, "" if it accepted (ok).
func ErrText(ok bool, r []byte) string {
	if ok {
		return ""
	}
	return string(r)
}
