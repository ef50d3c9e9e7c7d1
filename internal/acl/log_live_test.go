package acl_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/acl"
	"github.com/kvorum/kvorum/internal/kvdiff"
)

// liveKeys finds keys with redis-server's COMMAND GETKEYSANDFLAGS.
type liveKeys struct {
	t    *testing.T
	conn *kvdiff.Conn
}

func (k liveKeys) Keys(_ *acl.Command, args [][]byte) []acl.KeyRef {
	q := []string{"COMMAND", "GETKEYSANDFLAGS"}
	for _, a := range args {
		q = append(q, string(a))
	}
	v, err := k.conn.Do(q...)
	if err != nil {
		k.t.Fatal(err)
	}
	var out []acl.KeyRef
	for _, e := range v.Elems {
		var flags []string
		for _, f := range e.Elems[1].Elems {
			flags = append(flags, string(f.Str))
		}
		for i, a := range args {
			if string(a) == string(e.Elems[0].Str) {
				out = append(out, acl.KeyRef{Pos: i, Flags: acl.KeyFlagsOf(flags...)})
				break
			}
		}
	}
	return out
}

// TestLogLive runs refused commands on redis-server as a restricted user
// and compares its ACL LOG (all but age and client info) with the
// package's Log fed with EntryFor/AuthEntryFor of the package's checks.
// Every event is within 60 s, so the merging is Redis's.
func TestLogLive(t *testing.T) {
	if !kvdiff.HaveRedis() {
		t.Skip("redis-server not installed: the ACL LOG comparison needs it live")
	}
	addr := kvdiff.StartServer(t)
	admin, err := kvdiff.Dial(addr, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	rules := []string{"on", ">p", "~k*", "&c*", "-@all", "+get", "+set", "+publish", "+multi", "+exec", "+subscribe", "(~s* +del)"}
	reg := acl.NewRegistry(commands)
	u := mustSet(t, reg, "lu", rules...)
	if v, _ := admin.Do(append([]string{"ACL", "SETUSER", "lu"}, rules...)...); v.Type != '+' {
		t.Fatal(kvdiff.Render(v))
	}
	c, err := kvdiff.Dial(addr, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if v, _ := c.Do("AUTH", "lu", "p"); v.Type != '+' {
		t.Fatal(kvdiff.Render(v))
	}
	log := acl.NewLog(acl.DefaultLogMaxLen)
	now := time.Unix(0, 0)
	ctx := acl.ContextToplevel
	for _, line := range []string{
		"GET k1", "GET x", "SET x v", "GET x", "DEL k1", "DEL s1", "DEL x", "PUBLISH d m", "PUBLISH c1 m",
		"SUBSCRIBE c1 zz", "AUTH lu wrong", "auth nobody x", "AUTH lu wrong", "FLUSHALL", "GET x",
		"MULTI", "GET y", "FLUSHALL", "EXEC", "GET y",
	} {
		args := argv(line)
		v, err := c.Do(strings.Fields(line)...)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "SUBSCRIBE") {
			// a refused SUBSCRIBE leaves the connection as it was
			if v.Type != '-' {
				t.Fatalf("%s: %s", line, kvdiff.Render(v))
			}
		}
		now = now.Add(time.Second)
		switch strings.ToUpper(string(args[0])) {
		case "MULTI":
			ctx = acl.ContextMulti
			continue
		case "EXEC":
			ctx = acl.ContextToplevel
			continue
		case "AUTH":
			if _, err := reg.Authenticate(string(args[1]), string(args[2])); err != nil {
				log.Add(acl.AuthEntryFor(string(args[1]), args[0], ctx), now)
			}
			continue
		}
		cmd := commands.Lookup(args)
		d, pos := u.Check(cmd, args, liveKeys{t, admin})
		if (d == acl.Allowed) != (v.Type != '-') {
			t.Fatalf("%s: package %v, redis-server %s", line, d, kvdiff.Render(v))
		}
		if d != acl.Allowed {
			if got, want := "NOPERM "+strings.TrimPrefix(string(v.Str), "NOPERM "), d.NoPerm(cmd.Name); got != want {
				t.Errorf("%s: redis-server %q, package %q", line, got, want)
			}
			log.Add(acl.EntryFor("lu", cmd, args, d, pos, ctx), now)
		}
	}
	v, err := admin.Do("ACL", "LOG", "100")
	if err != nil {
		t.Fatal(err)
	}
	var theirs, mine []string
	for _, e := range v.Elems {
		f := map[string]string{}
		for i := 0; i+1 < len(e.Elems); i += 2 {
			val := e.Elems[i+1]
			s := string(val.Str)
			if val.Type == ':' {
				s = fmt.Sprint(val.Int)
			}
			f[string(e.Elems[i].Str)] = s
		}
		theirs = append(theirs, fmt.Sprintf("%s %s %s %s %s", f["count"], f["reason"], f["context"], f["object"], f["username"]))
	}
	for _, e := range log.Entries(100) {
		mine = append(mine, fmt.Sprintf("%d %s %s %s %s", e.Count, e.Reason.LogReason(), e.Context, e.Object, e.Username))
	}
	if strings.Join(mine, "\n") != strings.Join(theirs, "\n") {
		t.Errorf("ACL LOG\npackage:\n%s\nredis-server:\n%s", strings.Join(mine, "\n"), strings.Join(theirs, "\n"))
	}
	t.Logf("ACL LOG:\n%s", strings.Join(theirs, "\n"))
	if len(theirs) < 8 {
		t.Errorf("only %d entries", len(theirs))
	}
}
