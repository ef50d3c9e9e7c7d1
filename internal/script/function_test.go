package script

import (
	"fmt"
	"strings"
	"testing"
)

func parseLib(t *testing.T, code string) *Library {
	t.Helper()
	lib, r := ParseLibrary([]byte(code))
	if lib == nil {
		t.Fatalf("ParseLibrary(%q): %s", code, show(r))
	}
	return lib
}

// TestLibraryLoad: Load reports what the body registers, in registration
// order, and refuses bodies that register nothing or register badly.
func TestLibraryLoad(t *testing.T) {
	lib := parseLib(t, "#!lua name=mylib\n"+
		"redis.register_function('f1', function() return 1 end)\n"+
		"redis.register_function{function_name='F2', callback=function() end, flags={'no-writes', 'allow-stale'}, description='second'}")
	if lib.Name != "mylib" {
		t.Fatalf("name %q", lib.Name)
	}
	funcs, r, ok := lib.Load()
	if !ok {
		t.Fatalf("load: %s", show(r))
	}
	want := []Function{{Name: "f1"}, {Name: "F2", Description: "second", HasDescription: true, Flags: 1 | 4}}
	if fmt.Sprint(funcs) != fmt.Sprint(want) {
		t.Fatalf("registered %+v, want %+v", funcs, want)
	}
	if funcs[0].NoWrites() || !funcs[1].NoWrites() || fmt.Sprint(funcs[1].FlagNames()) != "[no-writes allow-stale]" {
		t.Errorf("flags: %v %v", funcs[1].NoWrites(), funcs[1].FlagNames())
	}
	for _, c := range []struct{ code, want string }{
		{"#!lua name=a\nlocal x = 1", "ERR No functions registered"},
		{"#!lua name=a\nthis is not lua", "ERR Error compiling function: user_function line:2(column:7) near 'is'"},
		{"#!lua name=a\nredis.call('ping')", "ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'call'"},
		{"#!lua name=a\nmath.random()", "ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'math'"},
		{"#!lua name=a\nredis.register_function('f', 1)", "ERR Error registering functions: ERR second argument to redis.register_function must be a function"},
		{"#!lua name=a\nredis.register_function('a-b', function() end)", "ERR Error registering functions: ERR Library names can only contain letters"},
		{"#!lua name=a\nredis.register_function('f', function() end) redis.register_function('F', function() end)", "ERR Error registering functions: ERR Function already exists in the library"},
		{"#!lua name=a\nredis.register_function{function_name='f', callback=function() end, flags={'nope'}}", "ERR Error registering functions: ERR unknown flag given"},
		{"#!lua name=a\nwhile true do end", budgetErr},
	} {
		funcs, r, ok := parseLib(t, c.code).Load()
		if ok || funcs != nil || !strings.HasPrefix(string(r.Str), c.want) {
			t.Errorf("Load(%q) = %v %v %s, want %q", c.code, funcs, ok, show(r), c.want)
		}
	}
}

// TestParseLibrary: the first line's checks, with Redis's texts.
func TestParseLibrary(t *testing.T) {
	for code, want := range map[string]string{
		"no shebang":                  "ERR Missing library metadata",
		"#!lua name=a":                "ERR Invalid library metadata",
		"#!lua name=a b\n":            "ERR Invalid metadata value given: b",
		"#!lua name=a name=b\n":       "ERR Invalid metadata value, name argument was given multiple times",
		"#!lua\n":                     "ERR Library name was not given",
		"#!lua name=a.b\n":            "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long",
		"#!js name=a\n":               "ERR Engine 'js' not found",
		"#!lua name=\"a\" \"b\"x\n":   "ERR Invalid library metadata",
		"#!LUA NAME=ok\nreturn 1\n":   "",
		"#!lua   name=ok  \nreturn 1": "",
	} {
		lib, r := ParseLibrary([]byte(code))
		switch {
		case want == "" && (lib == nil || lib.Name != "ok"):
			t.Errorf("ParseLibrary(%q): %+v %s", code, lib, show(r))
		case want != "" && (lib != nil || string(r.Str) != want):
			t.Errorf("ParseLibrary(%q) = %+v %s, want %q", code, lib, show(r), want)
		}
	}
}

// TestLibraryCall: a function gets KEYS and ARGV as arguments and calls
// the caller; the body runs again for every call, so upvalues start over;
// register_function is refused outside a load.
func TestLibraryCall(t *testing.T) {
	lib := parseLib(t, "#!lua name=c\nlocal n = 0\nlocal rf = redis.register_function\n"+
		"redis.register_function('count', function() n = n + 1 return n end)\n"+
		"redis.register_function('set', function(keys, args) return redis.call('SET', keys[1], args[1]) end)\n"+
		"redis.register_function('again', function() rf('x', function() end) end)\n"+
		"redis.register_function('spin', function() while true do end end)")
	if _, r, ok := lib.Load(); !ok {
		t.Fatalf("load: %s", show(r))
	}
	c := &fakeCaller{}
	for i := 0; i < 3; i++ {
		wantReply(t, "count", lib.Call(c, "count", nil, nil, 1, nil), int64(1))
	}
	wantReply(t, "set", lib.Call(c, "SET", [][]byte{[]byte("k")}, [][]byte{[]byte("v")}, 1, nil), "OK")
	if fmt.Sprint(c.calls) != "[SET k v]" {
		t.Errorf("calls: %q", c.calls)
	}
	wantReply(t, "register at run time", lib.Call(c, "again", nil, nil, 1, nil),
		"ERR:ERR redis.register_function can only be called on FUNCTION LOAD command script: again, on @user_function:6.")
	wantReply(t, "budget", lib.Call(c, "spin", nil, nil, 1, nil), "ERR:"+budgetErr)
	wantReply(t, "unknown", lib.Call(c, "nope", nil, nil, 1, nil), "ERR:ERR Function not found")
	// A read-only caller refuses the write; the error names the function.
	ro := &fakeCaller{readOnly: true}
	wantReply(t, "read-only", lib.Call(ro, "set", [][]byte{[]byte("k")}, [][]byte{[]byte("v")}, 1, nil),
		"ERR:ERR Write commands are not allowed from read-only scripts. script: set, on @user_function:5.")
	// Scripts still see the ordinary globals after functions ran.
	wantReply(t, "eval after", eval(t, c, "return {string.len(KEYS[1]), type(redis.register_function)}", []string{"abc"}, nil), []any{int64(3), "nil"})
}
