package script

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/kvorum/kvorum/internal/reply"
	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// Script is Lua code compiled to gopher-lua bytecode: an EVAL script, or
// the body of a function library. Immutable, shared by every state and
// goroutine.
type Script struct {
	sha      string // the script's SHA1 (lower-case hex), or the library body's cache key
	proto    *lua.FunctionProto
	shebang  bool // the script declared flags ("#!lua ...")
	noWrites bool // ... and no-writes among them
	allowOOM bool // ... and allow-oom among them
}

// Shebang reports whether the script starts with a "#!lua" line: Redis 7
// then treats it as a write script unless it declares no-writes.
func (s *Script) Shebang() bool { return s.shebang }

// NoWrites reports whether the script declares the no-writes flag.
func (s *Script) NoWrites() bool { return s.noWrites }

// AllowOOM reports whether the script declares the allow-oom flag.
func (s *Script) AllowOOM() bool { return s.allowOOM }

// SHA1Hex returns the lower-case hex SHA1 of b: a script's name.
func SHA1Hex(b []byte) string {
	h := sha1.Sum(b)
	return hex.EncodeToString(h[:])
}

// compileCache maps sha -> *Script. Bounded: when full, the oldest entry
// goes. Compilation is a pure function of the body, so what the cache
// holds changes speed only, never results.
var compileCache struct {
	sync.Mutex
	m     map[string]*Script
	order []string
}

func cachedScript(sha string) *Script {
	compileCache.Lock()
	defer compileCache.Unlock()
	return compileCache.m[sha]
}

// Compile compiles an EVAL body whose SHA1 (lower-case hex) is sha, with
// its "#!lua flags=..." first line if any. On error it returns nil and
// Redis's error reply. Compiled scripts are cached by sha (at most
// cacheSize of them).
func Compile(sha string, body []byte) (*Script, reply.Reply) {
	if cs := cachedScript(sha); cs != nil {
		return cs, reply.Reply{}
	}
	cs := &Script{sha: sha}
	src := body
	if len(body) >= 2 && body[0] == '#' && body[1] == '!' {
		n, msg := parseShebang(body, cs)
		if msg != "" {
			return nil, reply.Error("ERR " + msg)
		}
		src = body[n:] // keep the line feed: line numbers stay right
	}
	proto, err := compileLua(string(src), scriptSourceName)
	if err != nil {
		return nil, reply.Error(oneLine("ERR Error compiling script (new function): " + err.Error()))
	}
	cs.proto = proto
	return cacheScript(cs), reply.Reply{}
}

// cacheScript adds cs to compileCache under cs.sha; it returns the entry
// already there if any.
func cacheScript(cs *Script) *Script {
	compileCache.Lock()
	defer compileCache.Unlock()
	if compileCache.m == nil {
		compileCache.m = map[string]*Script{}
	}
	if old, ok := compileCache.m[cs.sha]; ok {
		return old
	}
	if len(compileCache.order) >= cacheSize {
		delete(compileCache.m, compileCache.order[0])
		compileCache.order = compileCache.order[1:]
	}
	compileCache.m[cs.sha] = cs
	compileCache.order = append(compileCache.order, cs.sha)
	return cs
}

// parseShebang parses Redis 7's "#!lua flags=..." first line; it returns
// the line's length or an error text.
func parseShebang(body []byte, cs *Script) (int, string) {
	nl := strings.IndexByte(string(body), '\n')
	if nl < 0 {
		return 0, "Invalid script shebang"
	}
	parts := strings.Fields(string(body[:nl]))
	if len(parts) == 0 {
		return 0, "Invalid engine in script shebang"
	}
	if parts[0] != "#!lua" {
		return 0, "Unexpected engine in script shebang: " + parts[0]
	}
	cs.shebang = true
	for _, p := range parts[1:] {
		if !strings.HasPrefix(p, "flags=") {
			return 0, "Unknown lua shebang option: " + p
		}
		if p == "flags=" {
			continue
		}
		for _, f := range strings.Split(p[len("flags="):], ",") {
			switch f {
			case "no-writes":
				cs.noWrites = true
			case "allow-oom":
				cs.allowOOM = true
			case "allow-stale", "no-cluster", "allow-cross-slot-keys":
			default:
				return 0, "Unexpected flag in script shebang: " + f
			}
		}
	}
	return nl, ""
}

// compileLua parses src, rewrites its syntax tree (see rewriter) and
// compiles it.
func compileLua(src, name string) (proto *lua.FunctionProto, err error) {
	defer func() {
		if p := recover(); p != nil {
			proto, err = nil, fmt.Errorf("%v", p)
		}
	}()
	if strings.HasPrefix(src, "\x1b") {
		// A binary chunk (LUA_SIGNATURE): Redis 7.0's Lua parses every
		// chunk as text, and the escape is its first token.
		return nil, fmt.Errorf("%s:1: unexpected symbol near 'char(27)'", name)
	}
	chunk, err := parse.Parse(strings.NewReader(src), name)
	if err != nil {
		return nil, err
	}
	rw := &rewriter{}
	if chunk, err = rw.chunk(chunk); err != nil {
		return nil, err
	}
	return lua.Compile(chunk, name)
}

// oneLine replaces CR and LF by spaces, byte by byte (the text may be any
// bytes): error and status replies are one line.
func oneLine(s string) string {
	if strings.IndexByte(s, '\r') < 0 && strings.IndexByte(s, '\n') < 0 {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if c == '\r' || c == '\n' {
			b[i] = ' '
		}
	}
	return string(b)
}

// SHA is the script's sha1, in lower-case hex.
func (s *Script) SHA() string { return s.sha }
