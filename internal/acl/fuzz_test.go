package acl_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/kvorum/kvorum/internal/acl"
)

// reparseable reports whether a description can be read back: Redis
// splits a selector "(...)" with sdssplitargs, so a key or channel
// pattern or a first argument inside one that has quotes or parentheses
// does not come back as it was (in Redis neither).
func reparseable(desc string) bool {
	i := strings.IndexByte(desc, '(')
	if i < 0 {
		return true
	}
	for _, sel := range strings.Split(desc[i:], " (") {
		sel = strings.TrimPrefix(strings.TrimSuffix(sel, ")"), "(")
		if strings.ContainsAny(sel, "()\"'") {
			return false
		}
	}
	return true
}

// firstArgWithBlank reports a rule "+cmd|arg" whose arg has a blank:
// Redis accepts it and describes it as it is, which reads back as two
// rules.
func firstArgWithBlank(args []string) bool {
	for _, a := range args {
		if strings.Contains(a, "|") && strings.ContainsAny(a, " \t\r\n\v\f") {
			return true
		}
	}
	return false
}

// starAmongPatterns reports a selector whose key patterns include "~*"
// next to others: "%RW~*" (or "%R~*" then "%W~*") adds "*" as a
// pattern, as in Redis 7.0, and Redis describes it as "~*", which reads
// back as allkeys and drops the other patterns (redis-server does the
// same; testdata/diff/misc.txt records it).
func starAmongPatterns(desc string) bool {
	for _, sel := range strings.Split(desc, " (") {
		n, star := 0, false
		for _, f := range strings.Fields(strings.Trim(sel, "()")) {
			if f[0] == '~' || f[0] == '%' {
				n++
				star = star || f == "~*"
			}
		}
		if star && n > 1 {
			return true
		}
	}
	return false
}

var fuzzSeeds = []string{
	"on >pw ~foo* &ch* +@read -get +config|get",
	"on nopass %R~r* %W~w* %RW~x resetchannels &n +@all -@dangerous -config|set",
	"off #5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8 (~a +get) (%R~b +@read &n)",
	"+select|0 +select|1 -@all +debug|object",
	"reset clearselectors allkeys allchannels allcommands",
	"(~a\n+get)\n(\"x y\"",
	"%\n%~a\n~*\n~x",
	"skip-sanitize-payload sanitize-payload <pw !abc",
	"+@all -@hash +hset -@write +@read -client|kill",
}

// FuzzRules applies arbitrary ACL SETUSER arguments: the parser never
// panics, a refused set leaves the user as it was, and an accepted one
// describes to rules that rebuild the same user (a fixed point), by
// SetUser and by LoadLines.
func FuzzRules(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(strings.ReplaceAll(s, " ", "\n"))
	}
	f.Fuzz(func(t *testing.T, in string) {
		args := strings.Split(in, "\n")
		reg := acl.NewRegistry(commands)
		if err := reg.SetUser("u", "on", "~k"); err != nil {
			t.Fatal(err)
		}
		before := reg.Lines()
		if err := reg.SetUser("u", args...); err != nil {
			if !slices.Equal(reg.Lines(), before) {
				t.Fatalf("a refused SETUSER changed the user: %v", err)
			}
			if !strings.HasPrefix(err.Error(), "ERR ") {
				t.Fatalf("error %q", err)
			}
			return
		}
		u := reg.User("u")
		desc := u.Describe()
		_ = u.Info()
		if !reparseable(desc) || firstArgWithBlank(args) || starAmongPatterns(desc) {
			return
		}
		again := acl.NewRegistry(commands)
		if err := again.SetUser("u", strings.Split(desc, " ")...); err != nil {
			t.Fatalf("description %q refused: %v", desc, err)
		}
		if d2 := again.User("u").Describe(); d2 != desc {
			t.Fatalf("not a fixed point:\n%q\n%q", desc, d2)
		}
		lines := reg.Lines()
		loaded := acl.NewRegistry(commands)
		if err := loaded.LoadLines(lines); err != nil {
			t.Fatalf("LoadLines(%q): %v", lines, err)
		}
		if !slices.Equal(loaded.Lines(), lines) {
			t.Fatalf("LoadLines:\n%q\n%q", lines, loaded.Lines())
		}
	})
}

// FuzzACLFile loads arbitrary ACL files: no panic; a refused file
// changes nothing; an accepted one saves to a file that loads back to
// the same users.
func FuzzACLFile(f *testing.F) {
	f.Add("user alice on >pw ~* +@all\nuser default off\n")
	f.Add("user a (~x +get\n")
	f.Add("# c\nuser\n\nuser  x\r\nuser a\tb\n")
	f.Add("user d on (~a +get) (%R~b &n)\nuser e on ~x ~* +nonexist bogus\n")
	f.Add("user s on ~k %RW~* %R~x\nuser t on (~k %R~* %W~*)\n")
	f.Fuzz(func(t *testing.T, content string) {
		reg := acl.NewRegistry(commands)
		if err := reg.SetUser("keep", "on", "~k", "+get"); err != nil {
			t.Fatal(err)
		}
		keep, def := reg.User("keep"), reg.Default()
		before := reg.Lines()
		if err := reg.Load("f.acl", []byte(content)); err != nil {
			if !slices.Equal(reg.Lines(), before) || keep.Deleted() {
				t.Fatalf("a refused file changed the users: %v", err)
			}
			if !strings.HasSuffix(err.Error(), "WARNING: ACL errors detected, no change to the previously active ACL rules was performed") {
				t.Fatalf("error %q", err)
			}
			return
		}
		if reg.Default() != def || reg.User("default") != def {
			t.Fatal("the default user's handle changed")
		}
		if reg.User("keep") != keep && !keep.Deleted() {
			t.Fatal("a replaced user is not marked deleted")
		}
		saved := reg.SaveFile()
		for _, l := range reg.Lines() {
			if !reparseable(l) || starAmongPatterns(l) {
				return
			}
		}
		again := acl.NewRegistry(commands)
		if err := again.Load("f.acl", saved); err != nil {
			t.Fatalf("saved file refused: %v\n%s", err, saved)
		}
		if !slices.Equal(again.Lines(), reg.Lines()) {
			t.Fatalf("save/load:\n%q\n%q", reg.Lines(), again.Lines())
		}
	})
}
