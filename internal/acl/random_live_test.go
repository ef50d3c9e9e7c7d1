package acl_test

import (
	"flag"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kvorum/kvorum/internal/acl"
	"github.com/kvorum/kvorum/internal/kvdiff"
)

var (
	randomN    = flag.Int("acl.random", 300, "TestRandomLive: number of random ACL SETUSER sequences")
	randomSeed = flag.Uint64("acl.seed", 1, "TestRandomLive: seed")
	dryruns    = flag.Int("acl.dryruns", 10, "TestRandomLive: ACL DRYRUNs per sequence")
)

// TestRandomLive compares random ACL SETUSER sequences (rules drawn from
// the generated command table, its categories and odd patterns) with a
// live redis-server: the replies, ACL GETUSER and ACL LIST. The recorded
// files hold a fixed set; this explores more (-acl.random, -acl.seed).
func TestRandomLive(t *testing.T) {
	if !kvdiff.HaveRedis() {
		t.Skip("redis-server not installed: the random comparison needs it live")
	}
	addr := kvdiff.StartServer(t)
	conn, err := kvdiff.Dial(addr, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rnd := rand.New(rand.NewPCG(*randomSeed, 7015))
	pick := func(s ...string) string { return s[rnd.IntN(len(s))] }
	cmd := func() string {
		s := acl.RedisCommands[rnd.IntN(len(acl.RedisCommands))].Name
		if rnd.IntN(8) == 0 {
			s = strings.ToUpper(s)
		}
		return s
	}
	cat := func() string { return acl.CategoryNames()[rnd.IntN(acl.NumCategories)] }
	pat := func() string {
		const chars = "ab*?[]^-\\:x()'\""
		n := rnd.IntN(5)
		var b strings.Builder
		for range n {
			b.WriteByte(chars[rnd.IntN(len(chars))])
		}
		return b.String()
	}
	var rule func(depth int) string
	rule = func(depth int) string {
		switch rnd.IntN(16) {
		case 0:
			return pick("on", "off", "nopass", "resetpass", "reset", "sanitize-payload", "skip-sanitize-payload", "clearselectors")
		case 1:
			return pick(">", "<", "#", "!") + pick("pw", "x", acl.HashPassword("pw"), acl.HashPassword("x"))
		case 2, 3:
			return pick("~", "%R~", "%W~", "%RW~", "%WR~", "%r~") + pat()
		case 4:
			return pick("allkeys", "resetkeys", "~*", "allchannels", "resetchannels", "&*")
		case 5:
			return "&" + pat()
		case 6, 7, 8:
			return pick("+", "-") + cmd()
		case 9, 10, 11:
			return pick("+", "-") + "@" + cat()
		case 12:
			return pick("+@all", "-@all", "allcommands", "nocommands")
		case 13:
			return "+" + pick("select", "debug", "get", "config", "client") + "|" + pick("0", "1", "get", "object", "x", "kill")
		case 14:
			if depth == 0 {
				var parts []string
				for range rnd.IntN(4) {
					parts = append(parts, rule(1))
				}
				return "(" + strings.Join(parts, " ") + ")"
			}
		}
		return pick("+get", "~k", "&c", "-@write")
	}
	outcomes := map[string]int{}
	defer func() { t.Logf("DRYRUN outcomes: %v", outcomes) }()
	for i := range *randomN {
		reg := acl.NewRegistry(commands)
		if v, _ := conn.Do("ACL", "DELUSER", "u"); v.Type == '-' {
			t.Fatal(kvdiff.Render(v))
		}
		for step := range 1 + rnd.IntN(3) {
			var rules []string
			for range 1 + rnd.IntN(8) {
				rules = append(rules, rule(0))
			}
			args := append([]string{"ACL", "SETUSER", "u"}, rules...)
			theirs, err := conn.Do(args...)
			if err != nil {
				t.Fatal(err)
			}
			mine := (&diffRun{t: t, reg: reg}).mine(args)
			if a, b := canon(args, mine), canon(args, theirs); a != b {
				t.Fatalf("case %d step %d: %s\npackage: %s\nredis-server: %s", i, step, kvdiff.String(args), a, b)
			}
			for _, q := range [][]string{{"ACL", "GETUSER", "u"}, {"ACL", "LIST"}} {
				theirs, err := conn.Do(q...)
				if err != nil {
					t.Fatal(err)
				}
				mine := (&diffRun{t: t, reg: reg}).mine(q)
				if a, b := canon(q, mine), canon(q, theirs); a != b {
					t.Fatalf("case %d step %d after %s: %s\npackage:\n%s\nredis-server:\n%s", i, step, kvdiff.String(args), kvdiff.String(q), a, b)
				}
			}
		}
		// DRYRUN of random commands with random arguments.
		if reg.User("u") == nil {
			continue
		}
		for range *dryruns {
			spec := acl.RedisCommands[rnd.IntN(len(acl.RedisCommands))]
			argv := strings.Split(spec.Name, "|")
			n := max(spec.Arity, -spec.Arity) + rnd.IntN(3)
			if spec.Arity > 0 {
				n = spec.Arity
			}
			for len(argv) < n {
				argv = append(argv, pick("a", "ab", "b", "x:1", "k", "c", "(", "*", "0", "1", "2", "get"))
			}
			q := append([]string{"ACL", "DRYRUN", "u"}, argv...)
			theirs, err := conn.Do(q...)
			if err != nil {
				t.Fatal(err)
			}
			bs := [][]byte{[]byte("u")}
			for _, a := range argv {
				bs = append(bs, []byte(a))
			}
			var mine kvdiff.Value
			denied, err := reg.DryRun(bs, liveKeys{t, conn})
			switch {
			case err != nil:
				mine = errv(err)
			case denied == "":
				mine = status("OK")
			default:
				mine = bulk(denied)
			}
			kind := kvdiff.Render(theirs)
			for _, k := range []string{"command", "key", "channel", "(error)"} {
				if strings.Contains(kind, k) {
					kind = k
				}
			}
			outcomes[kind]++
			if a, b := kvdiff.Render(mine), kvdiff.Render(theirs); a != b {
				lst, _ := conn.Do("ACL", "LIST")
				t.Fatalf("case %d: %s\npackage: %s\nredis-server: %s\n%s", i, kvdiff.String(q), a, b, kvdiff.Render(lst))
			}
		}
	}
}
