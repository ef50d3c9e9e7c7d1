package acl_test

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/kvorum/kvorum/internal/acl"
	"github.com/kvorum/kvorum/internal/kvdiff"
)

// TestACLFile compares Registry.Load with redis-server's ACL file
// (testdata/aclfile.txt, recorded with -rewrite; live when redis-server
// is installed). Directives, each with an ACL file as input:
//
//   - load: the file is written to the aclfile of a running
//     redis-server and ACL LOAD run; the output is ACL LOAD's reply and
//     ACL LIST after it (unchanged by a file with errors).
//   - startup: a new redis-server is started with --aclfile of the
//     file; the output is ACL LIST, or "aborted: " and the errors it
//     logs before exiting.
//
// Error messages name the file; it is shown as users.acl. The file
// redis-server reads has one more line at its end, the user the test
// connects as (adminLine; left out of ACL LIST), since the files may take
// the default user's rights away.
func TestACLFile(t *testing.T) {
	live := kvdiff.HaveRedis()
	if !live && kvdiff.Rewriting() {
		t.Fatal("-rewrite needs redis-server")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "users.acl")
	reg := acl.NewRegistry(commands)
	var addr string
	if live {
		if err := os.WriteFile(path, []byte(adminLine), 0o644); err != nil {
			t.Fatal(err)
		}
		var err error
		if addr, _, err = startRedisACL(t, path); err != nil {
			t.Fatal(err)
		}
	}
	norm := func(s string) string { return strings.ReplaceAll(s, path, "users.acl") }
	datadriven.RunTest(t, "testdata/aclfile.txt", func(t *testing.T, d *datadriven.TestData) string {
		content := []byte(strings.NewReplacer(`\r`, "\r", `\0`, "\x00").Replace(d.Input))
		var mine, theirs string
		switch d.Cmd {
		case "load":
			var reply kvdiff.Value
			if err := reg.Load("users.acl", content); err != nil {
				reply = errv(err)
			} else {
				reply = status("OK")
			}
			mine = kvdiff.Render(reply) + "\n" + canon([]string{"ACL", "LIST"}, bulks(reg.Lines()))
			if live {
				if err := os.WriteFile(path, withAdmin(content), 0o644); err != nil {
					t.Fatal(err)
				}
				r := adminDo(t, addr, "ACL", "LOAD")
				l := adminDo(t, addr, "ACL", "LIST")
				theirs = norm(kvdiff.Render(r)) + "\n" + canon([]string{"ACL", "LIST"}, l)
			}
		case "startup":
			fresh := acl.NewRegistry(commands)
			if err := fresh.Load("users.acl", content); err != nil {
				mine = "aborted: " + strings.TrimPrefix(err.Error(), "ERR ")
			} else {
				mine = canon([]string{"ACL", "LIST"}, bulks(fresh.Lines()))
			}
			if live {
				p := filepath.Join(t.TempDir(), "users.acl")
				if err := os.WriteFile(p, withAdmin(content), 0o644); err != nil {
					t.Fatal(err)
				}
				addr, log, err := startRedisACL(t, p)
				if err != nil {
					m := regexp.MustCompile(`Aborting Redis startup because of ACL errors: (.*)`).FindStringSubmatch(log)
					if m == nil {
						t.Fatalf("redis-server: %v\n%s", err, log)
					}
					theirs = "aborted: " + strings.ReplaceAll(m[1], p, "users.acl")
				} else {
					l := adminDo(t, addr, "ACL", "LIST")
					theirs = canon([]string{"ACL", "LIST"}, l)
				}
			}
		default:
			d.Fatalf(t, "unknown directive %q", d.Cmd)
		}
		if live {
			if d.Rewrite {
				if mine != theirs {
					t.Errorf("%s:\npackage:\n%s\nredis-server:\n%s", d.Pos, mine, theirs)
				}
				return theirs + "\n"
			}
			if theirs+"\n" != d.Expected {
				d.Fatalf(t, "%s\nrecorded:\n%sredis-server now:\n%s", kvdiff.RedisChanged, d.Expected, theirs)
			}
		}
		if mine+"\n" != d.Expected {
			d.Fatalf(t, "package:\n%s\nrecorded (redis-server):\n%s", mine, d.Expected)
		}
		return d.Expected
	})
}

const adminLine = "user __admin on nopass ~* &* +@all"

func withAdmin(content []byte) []byte {
	// Two newlines: a last line with a NUL loses its newline (see
	// readLikeFgets), and the admin line must stay a line of its own.
	return append(append(append([]byte(nil), content...), "\n\n"...), adminLine...)
}

// adminDo runs a command on a new connection authenticated as __admin (a
// successful ACL LOAD closes the connections of the users it replaces),
// leaving __admin out of an ACL LIST.
func adminDo(t *testing.T, addr string, args ...string) kvdiff.Value {
	t.Helper()
	c, err := kvdiff.Dial(addr, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if v, err := c.Do("AUTH", "__admin", "x"); err != nil || v.Type != '+' {
		t.Fatalf("AUTH __admin: %v %s", err, kvdiff.Render(v))
	}
	v, err := c.Do(args...)
	if err != nil {
		t.Fatal(err)
	}
	if args[1] == "LIST" {
		var keep []kvdiff.Value
		for _, e := range v.Elems {
			if !strings.HasPrefix(string(e.Str), "user __admin ") {
				keep = append(keep, e)
			}
		}
		v.Elems = keep
	}
	return v
}

// startRedisACL starts a private redis-server with an ACL file; err if it
// exits (the log is its output) or does not answer.
func startRedisACL(t *testing.T, aclfile string) (addr, log string, err error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	var out bytes.Buffer
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--aclfile", aclfile)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-done:
			done <- err
			return "", out.String(), errExited
		default:
		}
		// redis-server listens before it reads the ACL file, and
		// answers only after: any reply (NOAUTH if the default user has
		// a password) means it is up.
		if c, err := kvdiff.Dial(addr, 2); err == nil {
			_, err := c.Do("PING")
			c.Close()
			if err == nil {
				return addr, "", nil
			}
		}
	}
	return "", out.String(), errExited
}

var errExited = os.ErrProcessDone
