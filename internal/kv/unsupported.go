package kv

import (
	"strings"

	"github.com/kvorum/kvorum/internal/cmdspec"
)

// Unsupported returns the reply for a Redis command kvorum deliberately
// does not implement (cmdspec.Unsupported), ok=false if name is not one.
func Unsupported(name []byte) (Reply, bool) {
	if lookup(name) != nil {
		return Reply{}, false
	}
	reason, ok := cmdspec.Unsupported(string(name))
	if !ok {
		return Reply{}, false
	}
	return Error("ERR '" + strings.ToUpper(string(name)) + "' is not supported by kvorum: " + reason), true
}
