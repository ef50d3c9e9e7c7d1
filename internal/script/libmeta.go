package script

import (
	"bytes"
	"strings"

	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/resp/codec"
)

// Library is the code of a function library, FUNCTION LOAD's payload,
// with its metadata parsed.
type Library struct {
	Name string // from the first line, "#!lua name=<name>"
	body []byte // what is compiled: from the first line's line feed on (line numbers stay right)
}

// ParseLibrary parses the first line of a library's code, "#!lua
// name=<lib>" (Redis's functionExtractLibMetaData). On failure it returns
// nil and Redis's error reply; its checks include the name and engine
// checks that Redis makes before it looks at the stored libraries.
func ParseLibrary(code []byte) (*Library, reply.Reply) {
	name, nl, msg := parseLibMeta(code)
	if msg != "" {
		return nil, reply.Error("ERR " + msg)
	}
	return &Library{Name: name, body: code[nl:]}, reply.Reply{}
}

// parseLibMeta parses "#!lua name=<lib>": the name and the first line's
// length, or Redis's error text (without "ERR ").
func parseLibMeta(code []byte) (string, int, string) {
	if len(code) < 2 || code[0] != '#' || code[1] != '!' {
		return "", 0, "Missing library metadata"
	}
	nl := strings.IndexByte(string(code), '\n')
	if nl < 0 {
		return "", 0, "Invalid library metadata"
	}
	parts, ok := splitArgs(code[:nl])
	if !ok || len(parts) == 0 {
		return "", 0, "Invalid library metadata"
	}
	engine := parts[0][2:]
	var name *string
	for _, p := range parts[1:] {
		if len(p) >= 5 && strings.EqualFold(p[:5], "name=") {
			if name != nil {
				return "", 0, "Invalid metadata value, name argument was given multiple times"
			}
			n := p[5:]
			name = &n
			continue
		}
		return "", 0, "Invalid metadata value given: " + cString(p)
	}
	if name == nil {
		return "", 0, "Library name was not given"
	}
	if !validFunctionName(*name) {
		return "", 0, "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"
	}
	if !strings.EqualFold(engine, "lua") {
		return "", 0, "Engine '" + engine + "' not found"
	}
	return *name, nl, ""
}

// splitArgs is Redis's sdssplitargs over the C string line (up to its
// first NUL), as codec.SplitArgs; ok=false for unbalanced quotes.
func splitArgs(line []byte) ([]string, bool) {
	if i := bytes.IndexByte(line, 0); i >= 0 {
		line = line[:i]
	}
	words, err := codec.SplitArgs(line)
	if err != nil {
		return nil, false
	}
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = string(w)
	}
	return out, true
}

// validFunctionName is Redis's functionsVerifyName.
func validFunctionName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || cIsDigit(c) || cIsAlpha(c)) {
			return false
		}
	}
	return true
}
