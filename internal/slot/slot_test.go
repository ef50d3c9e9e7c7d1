package slot

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/localsrv"
)

func TestVectors(t *testing.T) {
	if got := CRC16([]byte("123456789")); got != 0x31C3 {
		t.Fatalf("CRC16(123456789) = %#x, want 0x31c3", got)
	}
	for key, want := range map[string]uint16{
		"foo": 12182, "bar": 5061, "somekey": 11058, "": 0,
		"{user1000}.following": Of([]byte("user1000")),
		"{user1000}.followers": Of([]byte("user1000")),
		"foo{}{bar}":           Of([]byte("foo{}{bar}")), // "{}" first: the whole key
		"foo{{bar}}zap":        Of([]byte("{bar")),       // up to the first '}'
		"foo{bar}{zap}":        Of([]byte("bar")),        // the first tag only
		"x{y":                  Of([]byte("x{y")),
	} {
		if got := Of([]byte(key)); got != want {
			t.Errorf("Of(%q) = %d, want %d", key, got, want)
		}
	}
}

// Every key's slot is what a Redis Cluster node says it is: CLUSTER
// KEYSLOT of a redis-server started with cluster-enabled, for random keys
// with and without braces.
func TestAgainstRedisCluster(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server is not installed")
		}
		t.Skip("redis-server is not installed")
	}
	// A cluster-enabled redis-server also binds its port + 10000 (the
	// cluster bus), which FreeAddr does not check and another test's
	// connection may hold: a few tries, each on a new port.
	var addrs []string
	var procs []*localsrv.Child
	for try := 0; ; try++ {
		addrs, procs, err = localsrv.RedisServers(context.Background(), bin, t.TempDir(), "cluster", 1, "--cluster-enabled", "yes")
		if err == nil {
			break
		}
		if try == 2 {
			t.Fatal(err)
		}
		t.Logf("starting redis-server (try %d): %v", try+1, err)
	}
	t.Cleanup(func() { _ = localsrv.StopAll(procs) })
	c, err := net.Dial("tcp", addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("ab{}{}x\x00\xff")
	keys := []string{"{}", "{", "}", "}{", "{a", "a}", "{{}}", "\x00{\xff}"}
	for i := 0; i < 3000; i++ {
		k := make([]byte, rng.IntN(12))
		for j := range k {
			if rng.IntN(2) == 0 {
				k[j] = alphabet[rng.IntN(len(alphabet))]
			} else {
				k[j] = byte(rng.IntN(256))
			}
		}
		keys = append(keys, string(k))
	}
	var req []byte
	for _, k := range keys {
		req = fmt.Appendf(req, "*3\r\n$7\r\nCLUSTER\r\n$7\r\nKEYSLOT\r\n$%d\r\n%s\r\n", len(k), k)
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(line, ":") {
			t.Fatalf("CLUSTER KEYSLOT %q: %q", k, line)
		}
		want, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
		if got := Of([]byte(k)); int(got) != want {
			t.Errorf("Of(%q) = %d, Redis says %d", k, got, want)
		}
	}
}

func BenchmarkOf(b *testing.B) {
	k := []byte("{user1000}.following:with-a-longer-suffix")
	for i := 0; i < b.N; i++ {
		Of(k)
	}
}
