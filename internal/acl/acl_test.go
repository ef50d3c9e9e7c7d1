package acl_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/acl"
)

func argv(s string) [][]byte {
	var out [][]byte
	for _, f := range strings.Fields(s) {
		out = append(out, []byte(f))
	}
	return out
}

// firstKeys is a KeySource for tests: the listed positions, with flags.
type fixedKeys struct {
	keys  []acl.KeyRef
	calls int
}

func (k *fixedKeys) Keys(*acl.Command, [][]byte) []acl.KeyRef { k.calls++; return k.keys }

func mustSet(t testing.TB, reg *acl.Registry, name string, rules ...string) *acl.User {
	t.Helper()
	if err := reg.SetUser(name, rules...); err != nil {
		t.Fatal(err)
	}
	return reg.User(name)
}

func TestCheck(t *testing.T) {
	reg := acl.NewRegistry(commands)
	u := mustSet(t, reg, "u", "on", "%R~r*", "%W~w*", "~rw*", "&ch*", "+@all", "-@dangerous", "+select|0",
		"(~sel* +get)")
	get, set, exists, sel := commands.LookupName("get"), commands.LookupName("set"), commands.LookupName("exists"), commands.LookupName("select")
	read := &fixedKeys{keys: []acl.KeyRef{{Pos: 1, Flags: acl.KeyFlagsOf("RO", "access")}}}
	write := &fixedKeys{keys: []acl.KeyRef{{Pos: 1, Flags: acl.KeyFlagsOf("OW", "update")}}}
	roOnly := &fixedKeys{keys: []acl.KeyRef{{Pos: 1, Flags: acl.KeyFlagsOf("RO")}}}
	for _, c := range []struct {
		cmd  *acl.Command
		args string
		keys acl.KeySource
		want acl.Denial
		pos  int
	}{
		{get, "get r1", read, acl.Allowed, 0},
		{get, "get w1", read, acl.DeniedKey, 1},
		{get, "get sel1", read, acl.Allowed, 0}, // the selector
		{set, "set w1 v", write, acl.Allowed, 0},
		{set, "set r1 v", write, acl.DeniedKey, 1},
		{set, "set sel1 v", write, acl.DeniedKey, 1},
		{set, "set rw1 v", write, acl.Allowed, 0},
		{exists, "exists w1", roOnly, acl.Allowed, 0}, // RO alone needs no permission
		{exists, "exists zz", roOnly, acl.DeniedKey, 1},
		{sel, "select 0", nil, acl.Allowed, 0}, // select is not dangerous... but allowed anyway
		{commands.LookupName("flushall"), "flushall", nil, acl.DeniedCommand, 0},
		{commands.LookupName("publish"), "publish ch1 m", nil, acl.Allowed, 0},
		{commands.LookupName("publish"), "publish news m", nil, acl.DeniedChannel, 1},
		{commands.LookupName("psubscribe"), "psubscribe ch*", nil, acl.Allowed, 0},
		{commands.LookupName("psubscribe"), "psubscribe ch1", nil, acl.DeniedChannel, 1}, // literal match only
		{commands.LookupName("subscribe"), "subscribe ch1 ch2 x", nil, acl.DeniedChannel, 3},
		{commands.LookupName("auth"), "auth a b", nil, acl.Allowed, 0},
	} {
		d, pos := u.Check(c.cmd, argv(c.args), c.keys)
		if d != c.want || pos != c.pos {
			t.Errorf("%s: got %v at %d, want %v at %d", c.args, d, pos, c.want, c.pos)
		}
	}
	fa := mustSet(t, reg, "fa", "on", "~*", "-@all", "+select|0", "+debug|object")
	if d, _ := fa.Check(sel, argv("select 0"), nil); d != acl.Allowed {
		t.Error("select 0 refused")
	}
	if d, _ := fa.Check(sel, argv("SELECT 1"), nil); d != acl.DeniedCommand {
		t.Error("select 1 allowed")
	}
	if !u.CheckKey([]byte("r5"), acl.KeyAccess) || u.CheckKey([]byte("w5"), acl.KeyAccess) {
		t.Error("CheckKey")
	}
	if !u.CheckChannel([]byte("ch*"), true) || u.CheckChannel([]byte("chx"), true) || !u.CheckChannel([]byte("chx"), false) {
		t.Error("CheckChannel")
	}
	if u.CheckUnrestrictedKeys(get, argv("get r1"), read, acl.KeyAccess) {
		t.Error("CheckUnrestrictedKeys without a * pattern")
	}
	all := mustSet(t, reg, "all", "on", "%R~*", "+@all")
	if !all.CheckUnrestrictedKeys(get, argv("get x"), read, acl.KeyAccess) || all.CheckUnrestrictedKeys(get, argv("get x"), read, acl.KeyUpdate) {
		t.Error("CheckUnrestrictedKeys with %R~*")
	}
}

// The hot path: no allocation for a user allowed everything, nor for a
// restricted one whose keys a KeySource gives.
func TestCheckAllocs(t *testing.T) {
	reg := acl.NewRegistry(commands)
	def := reg.Default()
	get := commands.Lookup(argv("GET k"))
	args := argv("GET k")
	keys := &fixedKeys{keys: []acl.KeyRef{{Pos: 1, Flags: acl.KeyAccess}}}
	if n := testing.AllocsPerRun(100, func() { def.Check(get, args, keys) }); n != 0 {
		t.Errorf("default user: %v allocations", n)
	}
	if keys.calls != 0 {
		t.Error("keys found for an allkeys user")
	}
	r := mustSet(t, reg, "r", "on", "~k*", "%R~x*", "&c", "-@all", "+@read", "(~z +set)")
	args = argv("GET kk")
	if n := testing.AllocsPerRun(100, func() {
		if d, _ := r.Check(get, args, keys); d != acl.Allowed {
			t.Fatal(d)
		}
	}); n != 0 {
		t.Errorf("restricted user: %v allocations", n)
	}
	if n := testing.AllocsPerRun(100, func() { commands.Lookup(args) }); n != 0 {
		t.Errorf("Lookup: %v allocations", n)
	}
}

func TestExtraCommands(t *testing.T) {
	cmds, err := acl.NewCommands(
		acl.CommandSpec{Name: "lease", Arity: -2, Categories: acl.CatSlow},
		acl.CommandSpec{Name: "lease|grant", Arity: -3, Categories: acl.CatWrite | acl.CatSlow},
		acl.CommandSpec{Name: "lock", Arity: -3, Categories: acl.CatWrite | acl.CatBlocking},
	)
	if err != nil {
		t.Fatal(err)
	}
	reg := acl.NewRegistry(cmds)
	u := mustSet(t, reg, "u", "on", "~*", "+@blocking", "+lease|grant")
	if d, _ := u.Check(cmds.Lookup(argv("LOCK a b")), argv("LOCK a b"), nil); d != acl.Allowed {
		t.Error("lock refused")
	}
	if got := u.Info().Commands; !strings.Contains(got, "+@blocking") || !strings.Contains(got, "+lease|grant") {
		t.Errorf("describe: %s", got)
	}
	if cat, _ := reg.Cat("blocking"); !strings.Contains(strings.Join(cat, " "), "lock") {
		t.Error("ACL CAT blocking misses lock")
	}
	for _, bad := range [][]acl.CommandSpec{
		{{Name: "get"}},
		{{Name: "nope|x"}},
		{{Name: "a b"}},
	} {
		if _, err := acl.NewCommands(bad...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestHandles(t *testing.T) {
	reg := acl.NewRegistry(nil)
	u := mustSet(t, reg, "u", "on", ">pw", "~*", "+get")
	if !u.PasswordOK("pw") || u.PasswordOK("no") {
		t.Error("password")
	}
	if _, err := reg.Authenticate("u", "no"); err == nil || err.Error() != acl.ErrWrongPass {
		t.Errorf("Authenticate: %v", err)
	}
	mustSet(t, reg, "u", "off")
	if u.Enabled() || u.PasswordOK("pw") {
		t.Error("the handle did not see the change")
	}
	if n, _ := reg.DelUser("u"); n != 1 || !u.Deleted() {
		t.Error("DelUser")
	}
	if _, err := reg.DelUser("default"); err == nil {
		t.Error("default deleted")
	}
	lines := []string{"user a on nopass ~x +@read", "user default off"}
	if err := reg.LoadLines(lines); err != nil {
		t.Fatal(err)
	}
	if reg.Default().Enabled() || reg.User("a") == nil {
		t.Error("LoadLines")
	}
}

func TestGenPass(t *testing.T) {
	for bits, want := range map[int64]int{256: 64, 1: 1, 5: 2, 4096: 1024, 7: 2} {
		p, err := acl.GenPass(bits)
		if err != nil || len(p) != want || strings.Trim(p, "0123456789abcdef") != "" {
			t.Errorf("GenPass(%d) = %q, %v", bits, p, err)
		}
	}
	for _, bits := range []int64{0, -1, 4097} {
		if _, err := acl.GenPass(bits); err == nil || err.Error() != "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096" {
			t.Errorf("GenPass(%d): %v", bits, err)
		}
	}
}

func TestLog(t *testing.T) {
	t0 := time.Unix(1000, 0)
	l := acl.NewLog(3)
	e := acl.LogEntry{Reason: acl.DeniedKey, Context: acl.ContextToplevel, Object: "k", Username: "u", ClientInfo: "c1"}
	l.Add(e, t0)
	e.ClientInfo = "c2"
	l.Add(e, t0.Add(59*time.Second)) // merged: within 60 s of the last update
	l.Add(e, t0.Add(118*time.Second))
	got := l.Entries(10)
	if len(got) != 1 || got[0].Count != 3 || got[0].ClientInfo != "c2" || !got[0].Created.Equal(t0) || !got[0].Updated.Equal(t0.Add(118*time.Second)) {
		t.Fatalf("merge: %+v", got)
	}
	if a := got[0].AgeSeconds(t0.Add(120500 * time.Millisecond)); a != 2.5 {
		t.Errorf("age %v", a)
	}
	l.Add(e, t0.Add(179*time.Second)) // 61 s after: a new entry
	o := e
	o.Context = acl.ContextMulti
	l.Add(o, t0.Add(180*time.Second))
	o.Reason = acl.DeniedCommand
	l.Add(o, t0.Add(181*time.Second))
	got = l.Entries(10)
	if len(got) != 3 || got[0].Reason != acl.DeniedCommand || got[2].Count != 1 || got[2].ID != 1 {
		t.Fatalf("new entries, max length: %+v", got)
	}
	l.Add(e, t0.Add(182*time.Second)) // matches the second entry: moved to the front
	got = l.Entries(10)
	if got[0].ID != 1 || got[0].Count != 2 || got[1].Reason != acl.DeniedCommand {
		t.Fatalf("move to front: %+v", got)
	}
	if len(l.Entries(-1)) != 0 || len(l.Entries(2)) != 2 {
		t.Error("count")
	}
	l.Reset()
	if l.Len() != 0 {
		t.Error("reset")
	}
	if acl.DeniedAuth.LogReason() != "auth" || acl.ContextLua.String() != "lua" {
		t.Error("names")
	}
}

func TestMessages(t *testing.T) {
	if got := acl.DeniedCommand.NoPerm("config|get"); got != "NOPERM this user has no permissions to run the 'config|get' command" {
		t.Error(got)
	}
	if got := acl.DeniedKey.NoPerm("get"); got != "NOPERM this user has no permissions to access one of the keys used as arguments" {
		t.Error(got)
	}
	if got := acl.DeniedChannel.Message(); got != "can't publish to the channel mentioned in the command" {
		t.Error(got)
	}
}

func BenchmarkCheck(b *testing.B) {
	reg := acl.NewRegistry(commands)
	get := commands.LookupName("get")
	keys := &fixedKeys{keys: []acl.KeyRef{{Pos: 1, Flags: acl.KeyAccess}}}
	args := argv("GET user:1000")
	b.Run("allcommands-allkeys", func(b *testing.B) {
		u := reg.Default()
		b.ReportAllocs()
		for b.Loop() {
			u.Check(get, args, keys)
		}
	})
	b.Run("restricted", func(b *testing.B) {
		u := mustSet(b, reg, "r", "on", "~session:*", "%R~user:*", "resetchannels", "-@all", "+@read", "-keys")
		b.ReportAllocs()
		for b.Loop() {
			if d, _ := u.Check(get, args, keys); d != acl.Allowed {
				b.Fatal(d)
			}
		}
	})
	b.Run("restricted-selectors", func(b *testing.B) {
		u := mustSet(b, reg, "s", "on", "~a:*", "-@all", "+@write", "(~b:* +@hash)", "(%R~user:* +get)")
		b.ReportAllocs()
		for b.Loop() {
			if d, _ := u.Check(get, args, keys); d != acl.Allowed {
				b.Fatal(d)
			}
		}
	})
	b.Run("lookup+check", func(b *testing.B) {
		u := reg.Default()
		b.ReportAllocs()
		for b.Loop() {
			u.Check(commands.Lookup(args), args, keys)
		}
	})
}

func TestChannelsNarrowed(t *testing.T) {
	reg := acl.NewRegistry(nil)
	for _, c := range []struct {
		rules []string
		want  bool
	}{
		{[]string{"on", "resetchannels", "&a", "&b"}, false}, // created
		{[]string{"&c"}, false},                              // superset
		{[]string{"resetchannels", "&a", "(&b &c)"}, false},  // same, spread over selectors
		{[]string{"resetchannels", "&a"}, false},             // the selector keeps b and c
		{[]string{"clearselectors"}, true},
		{[]string{"allchannels"}, false},
		{[]string{"resetchannels", "&x"}, true}, // had allchannels
		{[]string{"(&*)"}, false},
		{[]string{"clearselectors"}, true}, // the selector had allchannels
	} {
		ch, err := reg.Apply("u", c.rules...)
		if err != nil {
			t.Fatal(err)
		}
		if ch.ChannelsNarrowed != c.want {
			t.Errorf("%v: narrowed %v", c.rules, ch.ChannelsNarrowed)
		}
	}
}

// Checks on a handle while its rules change and users load: no data race
// (run with -race), and every check sees one whole set of rules.
func TestConcurrentChecks(t *testing.T) {
	reg := acl.NewRegistry(commands)
	u := mustSet(t, reg, "u", "on", "~a*", "+get")
	get := commands.LookupName("get")
	keys := &fixedKeys{keys: []acl.KeyRef{{Pos: 1, Flags: acl.KeyAccess}}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			if i%2 == 0 {
				mustSet(t, reg, "u", "resetkeys", "~b*")
			} else {
				mustSet(t, reg, "u", "resetkeys", "~a*")
			}
			if i%50 == 0 {
				if err := reg.LoadLines(reg.Lines()); err != nil {
					t.Error(err)
				}
			}
		}
	}()
	args := [][]byte{[]byte("get"), []byte("a1")}
	for {
		select {
		case <-done:
			return
		default:
		}
		d, _ := u.Check(get, args, keys)
		if d != acl.Allowed && d != acl.DeniedKey {
			t.Fatal(d)
		}
		_ = u.Describe()
		_ = reg.Usernames()
	}
}

func TestSyncLines(t *testing.T) {
	reg := acl.NewRegistry(nil)
	a := mustSet(t, reg, "a", "on", "~x")
	b := mustSet(t, reg, "b", "on")
	src := acl.NewRegistry(nil)
	mustSet(t, src, "a", "off", "~y", "+get")
	mustSet(t, src, "c", "on")
	mustSet(t, src, "default", "off")
	if err := reg.SyncLines(src.Lines()); err != nil {
		t.Fatal(err)
	}
	if reg.User("a") != a || a.Deleted() || a.Enabled() || !b.Deleted() || reg.User("c") == nil || reg.Default().Enabled() {
		t.Error("SyncLines handles")
	}
	if strings.Join(reg.Lines(), "\n") != strings.Join(src.Lines(), "\n") {
		t.Errorf("SyncLines:\n%q\n%q", reg.Lines(), src.Lines())
	}
	if err := reg.SyncLines([]string{"user a bogus"}); err == nil || reg.User("a") != a {
		t.Error("a bad list applied")
	}
}
