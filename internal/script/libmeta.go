package script

import (
	"strings"

	"github.com/kvorum/kvorum/internal/reply"
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

// splitArgs is Redis's sdssplitargs: blank-separated words, with double
// quotes (escapes \xHH \n \r \t \b \a \c) and single quotes (\'); ok=false
// for unbalanced quotes or a closing quote followed by a non-blank.
func splitArgs(line []byte) ([]string, bool) {
	at := func(i int) byte {
		if i < len(line) {
			return line[i]
		}
		return 0
	}
	isSpace := func(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\v' || c == '\f' }
	var out []string
	p := 0
	for {
		for p < len(line) && isSpace(line[p]) {
			p++
		}
		if at(p) == 0 {
			return out, true
		}
		inq, insq, done := false, false, false
		var cur []byte
		for !done {
			c := at(p)
			switch {
			case inq:
				switch {
				case c == '\\' && at(p+1) == 'x' && isHex(at(p+2)) && isHex(at(p+3)):
					cur = append(cur, byte(digitVal(at(p+2))<<4|digitVal(at(p+3))))
					p += 3
				case c == '\\' && at(p+1) != 0:
					p++
					e := at(p)
					switch e {
					case 'n':
						e = '\n'
					case 'r':
						e = '\r'
					case 't':
						e = '\t'
					case 'b':
						e = '\b'
					case 'a':
						e = '\a'
					}
					cur = append(cur, e)
				case c == '"':
					if n := at(p + 1); n != 0 && !isSpace(n) {
						return nil, false
					}
					done = true
				case c == 0:
					return nil, false
				default:
					cur = append(cur, c)
				}
			case insq:
				switch {
				case c == '\\' && at(p+1) == '\'':
					p++
					cur = append(cur, '\'')
				case c == '\'':
					if n := at(p + 1); n != 0 && !isSpace(n) {
						return nil, false
					}
					done = true
				case c == 0:
					return nil, false
				default:
					cur = append(cur, c)
				}
			default:
				switch c {
				case ' ', '\n', '\r', '\t', 0:
					done = true
				case '"':
					inq = true
				case '\'':
					insq = true
				default:
					cur = append(cur, c)
				}
			}
			if at(p) != 0 {
				p++
			}
		}
		out = append(out, string(cur))
	}
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
