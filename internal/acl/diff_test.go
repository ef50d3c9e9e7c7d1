package acl_test

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/kvorum/kvorum/internal/acl"
	"github.com/kvorum/kvorum/internal/kvdiff"
)

// The differential files (testdata/diff/*.txt) hold ACL commands and the
// replies redis-server 7.0.15 gave to them, recorded with -rewrite. The
// package must give the same replies; when redis-server is installed, the
// test also checks that it still gives the recorded ones. Directives:
//
//   - reset: both sides drop every user but default (the package side
//     starts from a new Registry).
//   - run: one command, ACL SETUSER/GETUSER/LIST/USERS/DELUSER/CAT/
//     DRYRUN or AUTH (AUTH on a new connection).
//   - dryrun: input "user category arg..."; for every command and
//     subcommand of the category in the generated table (RedisCommands),
//     argv is its name and its minimal number of arguments drawn in turn
//     from the args (and, if its arity allows, two more). Each line is the
//     argv, the keys redis-server's COMMAND GETKEYSANDFLAGS finds in it
//     (the package gets its keys from this record, as kvorum's caller gets
//     them from its own key specs) and ACL DRYRUN's reply.
//
// Redis leaves some orders to its command table's hash order (the single
// command rules of a description, ACL CAT <category>); both sides are
// compared in a canonical order (canonRules, sorted CAT).

var commands = acl.MustCommands()

type diffRun struct {
	t    *testing.T
	reg  *acl.Registry
	live bool
	conn *kvdiff.Conn // redis-server, authenticated as default
	addr string       // redis-server's, for AUTH on a new connection
}

func TestDifferential(t *testing.T) {
	files, err := filepath.Glob("testdata/diff/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files: %v", err)
	}
	live := kvdiff.HaveRedis()
	if !live {
		if kvdiff.Rewriting() {
			t.Fatal("-rewrite needs redis-server")
		}
		t.Log("redis-server not installed: comparing with the recorded replies only")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			r := &diffRun{t: t, reg: acl.NewRegistry(commands), live: live}
			if live {
				addr := kvdiff.StartServer(t)
				var err error
				if r.conn, err = kvdiff.Dial(addr, 2); err != nil {
					t.Fatal(err)
				}
				r.addr = addr
				t.Cleanup(func() { r.conn.Close() })
			}
			datadriven.RunTest(t, file, r.directive)
		})
	}
}

func (r *diffRun) directive(t *testing.T, d *datadriven.TestData) string {
	var mine, theirs string
	switch d.Cmd {
	case "reset":
		r.reg = acl.NewRegistry(commands)
		if r.live {
			v := r.redis("ACL", "USERS")
			for _, e := range v.Elems {
				if string(e.Str) != "default" {
					r.redis("ACL", "DELUSER", string(e.Str))
				}
			}
		}
		return ""
	case "run":
		args, err := kvdiff.RunArgs(d)
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		mine = canon(args, r.mine(args))
		if r.live {
			theirs = canon(args, r.theirs(args))
		}
	case "dryrun":
		f := strings.Fields(d.Input)
		if len(f) < 3 {
			d.Fatalf(t, "dryrun: want user category args...")
		}
		lines := dryrunArgvs(f[1], f[2:])
		if r.live {
			theirs = r.theirsDryrun(f[0], lines)
		}
		rec := d.Expected
		if r.live && (d.Rewrite || rec == "") {
			rec = theirs
		}
		mine = r.mineDryrun(d, f[0], lines, rec)
	default:
		d.Fatalf(t, "unknown directive %q", d.Cmd)
	}
	if r.live {
		if theirs+"\n" != d.Expected && !d.Rewrite {
			d.Fatalf(t, "%s\n%s\nrecorded:\n%sredis-server now:\n%s", d.Input, kvdiff.RedisChanged, d.Expected, theirs)
		}
		if d.Rewrite {
			if mine != theirs {
				t.Errorf("%s: %s\npackage:\n%s\nredis-server:\n%s", d.Pos, d.Input, mine, theirs)
			}
			return theirs + "\n"
		}
	}
	if mine+"\n" != d.Expected {
		d.Fatalf(t, "%s\npackage:\n%s\nrecorded (redis-server):\n%s", d.Input, mine, d.Expected)
	}
	return d.Expected
}

func (r *diffRun) redis(args ...string) kvdiff.Value {
	v, err := r.conn.Do(args...)
	if err != nil {
		r.t.Fatalf("redis-server: %s: %v", kvdiff.String(args), err)
	}
	return v
}

func (r *diffRun) theirs(args []string) kvdiff.Value {
	if strings.EqualFold(args[0], "AUTH") {
		c, err := kvdiff.Dial(r.addr, 2)
		if err != nil {
			r.t.Fatal(err)
		}
		defer c.Close()
		v, err := c.Do(args...)
		if err != nil {
			r.t.Fatal(err)
		}
		return v
	}
	return r.redis(args...)
}

// Values of the package side.
func status(s string) kvdiff.Value { return kvdiff.Value{Type: '+', Str: []byte(s)} }
func bulk(s string) kvdiff.Value   { return kvdiff.Value{Type: '$', Str: []byte(s)} }
func errv(err error) kvdiff.Value  { return kvdiff.Value{Type: '-', Str: []byte(err.Error())} }
func intv(n int) kvdiff.Value      { return kvdiff.Value{Type: ':', Int: int64(n)} }
func bulks(ss []string) kvdiff.Value {
	v := kvdiff.Value{Type: '*', Elems: []kvdiff.Value{}}
	for _, s := range ss {
		v.Elems = append(v.Elems, bulk(s))
	}
	return v
}
func arr(vs ...kvdiff.Value) kvdiff.Value { return kvdiff.Value{Type: '*', Elems: vs} }

func selectorValue(s acl.SelectorInfo) []kvdiff.Value {
	return []kvdiff.Value{bulk("commands"), bulk(s.Commands), bulk("keys"), bulk(s.Keys), bulk("channels"), bulk(s.Channels)}
}

// userValue is ACL GETUSER's reply in RESP2.
func userValue(ui acl.UserInfo) kvdiff.Value {
	v := arr(bulk("flags"), bulks(ui.Flags), bulk("passwords"), bulks(ui.Passwords))
	v.Elems = append(v.Elems, selectorValue(ui.SelectorInfo)...)
	sels := arr()
	sels.Elems = []kvdiff.Value{}
	for _, s := range ui.Selectors {
		sels.Elems = append(sels.Elems, arr(selectorValue(s)...))
	}
	v.Elems = append(v.Elems, bulk("selectors"), sels)
	return v
}

// mine runs an ACL command or AUTH on the package.
func (r *diffRun) mine(args []string) kvdiff.Value {
	up := func(i int) string {
		if i < len(args) {
			return strings.ToUpper(args[i])
		}
		return ""
	}
	if up(0) == "AUTH" && len(args) == 3 {
		if _, err := r.reg.Authenticate(args[1], args[2]); err != nil {
			return errv(err)
		}
		return status("OK")
	}
	if up(0) != "ACL" {
		r.t.Fatalf("unsupported command %s", kvdiff.String(args))
	}
	switch {
	case up(1) == "SETUSER" && len(args) >= 3:
		if err := r.reg.SetUser(args[2], args[3:]...); err != nil {
			return errv(err)
		}
		return status("OK")
	case up(1) == "GETUSER" && len(args) == 3:
		u := r.reg.User(args[2])
		if u == nil {
			return kvdiff.Value{Type: '$', Null: true}
		}
		return userValue(u.Info())
	case up(1) == "LIST" && len(args) == 2:
		return bulks(r.reg.Lines())
	case up(1) == "USERS" && len(args) == 2:
		return bulks(r.reg.Usernames())
	case up(1) == "DELUSER" && len(args) >= 3:
		n, err := r.reg.DelUser(args[2:]...)
		if err != nil {
			return errv(err)
		}
		return intv(n)
	case up(1) == "CAT" && (len(args) == 2 || len(args) == 3):
		out, err := r.reg.Cat(args[2:]...)
		if err != nil {
			return errv(err)
		}
		return bulks(out)
	case up(1) == "DRYRUN" && len(args) >= 4:
		bs := make([][]byte, len(args)-2)
		for i, a := range args[2:] {
			bs[i] = []byte(a)
		}
		denied, err := r.reg.DryRun(bs, nil)
		if err != nil {
			return errv(err)
		}
		if denied == "" {
			return status("OK")
		}
		return bulk(denied)
	}
	r.t.Fatalf("unsupported command %s", kvdiff.String(args))
	return kvdiff.Value{}
}

// canon renders a reply with Redis's hash-ordered parts in canonical
// order.
func canon(args []string, v kvdiff.Value) string {
	if len(args) >= 2 && strings.EqualFold(args[0], "ACL") {
		switch strings.ToUpper(args[1]) {
		case "CAT":
			if len(args) == 3 && v.Type == '*' {
				sort.Slice(v.Elems, func(i, j int) bool { return string(v.Elems[i].Str) < string(v.Elems[j].Str) })
			}
		case "LIST":
			for i := range v.Elems {
				v.Elems[i].Str = []byte(canonRules(string(v.Elems[i].Str)))
			}
		case "GETUSER":
			canonGetuser(&v)
		}
	}
	return kvdiff.Render(v)
}

func canonGetuser(v *kvdiff.Value) {
	for i := 0; i+1 < len(v.Elems); i += 2 {
		switch string(v.Elems[i].Str) {
		case "commands":
			v.Elems[i+1].Str = []byte(canonRules(string(v.Elems[i+1].Str)))
		case "selectors":
			for j := range v.Elems[i+1].Elems {
				canonGetuser(&v.Elems[i+1].Elems[j])
			}
		}
	}
}

// canonRules puts the single command rules of each selector of a user
// description (or a GETUSER commands field) in canonical order: by
// command name, a container's own rule before its subcommands' (sorted);
// allowed first arguments keep their order (Redis keeps them in a list).
func canonRules(s string) string {
	toks := strings.Split(s, " ")
	isRule := func(t string) bool {
		return len(t) > 0 && (t[0] == '+' || t[0] == '-') && !strings.HasPrefix(t[1:], "@")
	}
	for i := 0; i < len(toks); {
		if !isRule(toks[i]) {
			i++
			continue
		}
		j := i
		for j < len(toks) && isRule(toks[j]) {
			j++
		}
		run := toks[i:j]
		paren := strings.HasSuffix(run[len(run)-1], ")")
		if paren {
			run[len(run)-1] = strings.TrimSuffix(run[len(run)-1], ")")
		}
		sortRules(run)
		if paren {
			run[len(run)-1] += ")"
		}
		i = j
	}
	return strings.Join(toks, " ")
}

func sortRules(run []string) {
	base := func(t string) string { b, _, _ := strings.Cut(t[1:], "|"); return b }
	sort.SliceStable(run, func(i, j int) bool {
		bi, bj := base(run[i]), base(run[j])
		if bi != bj {
			return bi < bj
		}
		si, sj := strings.Contains(run[i], "|"), strings.Contains(run[j], "|")
		if si != sj {
			return !si
		}
		if !si || commands.LookupName(bi) == nil || len(commands.LookupName(bi).Subcommands) == 0 {
			return false // first arguments: keep their order
		}
		return run[i][1:] < run[j][1:]
	})
}

// dryrunArgvs is the argvs a dryrun block checks: every command and
// subcommand of category in the generated table, with its minimal
// arguments from pool (and two more when its arity allows).
func dryrunArgvs(category string, pool []string) [][]string {
	cat, ok := acl.CategoryByName(category)
	if !ok {
		panic("unknown category " + category)
	}
	var out [][]string
	next := 0
	fill := func(argv []string, n int) []string {
		argv = append([]string(nil), argv...)
		for len(argv) < n {
			argv = append(argv, pool[next%len(pool)])
			next++
		}
		return argv
	}
	for _, s := range acl.RedisCommands {
		if s.Categories&cat == 0 {
			continue
		}
		argv := strings.Split(s.Name, "|")
		n := s.Arity
		if n < 0 {
			n = -n
		}
		out = append(out, fill(argv, n))
		if s.Arity < 0 {
			out = append(out, fill(argv, n+2))
		}
	}
	return out
}

// theirsDryrun asks redis-server for each argv's keys and DRYRUN reply.
func (r *diffRun) theirsDryrun(user string, argvs [][]string) string {
	var b strings.Builder
	for _, argv := range argvs {
		keys := r.redis(append([]string{"COMMAND", "GETKEYSANDFLAGS"}, argv...)...)
		var ks []string
		if keys.Type == '*' {
			for _, k := range keys.Elems {
				var fl []string
				for _, f := range k.Elems[1].Elems {
					fl = append(fl, string(f.Str))
				}
				ks = append(ks, string(k.Elems[0].Str)+"("+strings.Join(fl, ",")+")")
			}
		}
		if len(ks) == 0 {
			ks = []string{"-"}
		}
		reply := r.redis(append([]string{"ACL", "DRYRUN", user}, argv...)...)
		fmt.Fprintf(&b, "%s | %s | %s\n", kvdiff.String(argv), strings.Join(ks, " "), kvdiff.Render(reply))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// recordedKeys is a KeySource answering from a dryrun line's record.
type recordedKeys []acl.KeyRef

func (k recordedKeys) Keys(*acl.Command, [][]byte) []acl.KeyRef { return k }

// mineDryrun runs the argvs on the package with the keys recorded for
// them.
func (r *diffRun) mineDryrun(d *datadriven.TestData, user string, argvs [][]string, rec string) string {
	recLines := strings.Split(strings.TrimSuffix(rec, "\n"), "\n")
	if len(recLines) != len(argvs) {
		d.Fatalf(r.t, "dryrun: %d recorded lines for %d commands (re-record with -rewrite)", len(recLines), len(argvs))
	}
	var b strings.Builder
	for i, argv := range argvs {
		parts := strings.SplitN(recLines[i], " | ", 3)
		if len(parts) != 3 || parts[0] != kvdiff.String(argv) {
			d.Fatalf(r.t, "dryrun: recorded line %q is not for %s (re-record with -rewrite)", recLines[i], kvdiff.String(argv))
		}
		var keys recordedKeys
		if parts[1] != "-" {
			for _, k := range strings.Split(parts[1], " ") {
				name, flags, _ := strings.Cut(strings.TrimSuffix(k, ")"), "(")
				pos := -1
				for j, a := range argv {
					if a == name {
						pos = j
						break
					}
				}
				keys = append(keys, acl.KeyRef{Pos: pos, Flags: acl.KeyFlagsOf(strings.Split(flags, ",")...)})
			}
		}
		bs := make([][]byte, 0, len(argv)+1)
		bs = append(bs, []byte(user))
		for _, a := range argv {
			bs = append(bs, []byte(a))
		}
		var reply kvdiff.Value
		denied, err := r.reg.DryRun(bs, keys)
		switch {
		case err != nil:
			reply = errv(err)
		case denied == "":
			reply = status("OK")
		default:
			reply = bulk(denied)
		}
		fmt.Fprintf(&b, "%s | %s | %s\n", kvdiff.String(argv), parts[1], kvdiff.Render(reply))
	}
	return strings.TrimSuffix(b.String(), "\n")
}
