package server

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/transport"
)

// hostsTable resolves the test's host names (node1.test, ...) to IPs that
// a test changes, as a container network's DNS does when a container
// restarts with a new IP; the nodes dial through it (Config.PeerDial),
// resolving at every dial.
type hostsTable struct {
	mu    sync.Mutex
	hosts map[string]string
	dials map[string]int // by the IP dialed
}

func (h *hostsTable) set(host, ip string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hosts[host] = ip
}

func (h *hostsTable) dialed(ip string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dials[ip]
}

func (h *hostsTable) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	ip, ok := h.hosts[host]
	if ok {
		h.dials[ip]++
	}
	h.mu.Unlock()
	if !ok && strings.HasSuffix(host, ".test") {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	if ok {
		host = ip
	}
	var d net.Dialer
	return d.DialContext(ctx, network, net.JoinHostPort(host, port))
}

// Three nodes listen on 127.0.0.1 and advertise peer addresses by host
// name (node1 founds the cluster, 2 and 3 join through node1's name); the
// member list holds the names. Node 2 then restarts, from its data
// directory alone, in a "new container": listening on 127.0.0.2, its name
// now resolving there. The others re-resolve the name when they dial it
// again, so that writes through node 2 replicate, and node 2 kept its id,
// cluster and data.
func TestAdvertisedNamesSurviveRestartAtNewIP(t *testing.T) {
	if ln, err := net.Listen("tcp", "127.0.0.2:0"); err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	} else {
		ln.Close()
	}
	hosts := &hostsTable{hosts: map[string]string{}, dials: map[string]int{}}
	c := &testCluster{t: t, net: transport.NewPartitioner(), nodes: map[uint64]*Node{}, cfgs: map[uint64]Config{}}
	t.Cleanup(c.stopAll)
	name := func(id uint64) string { return fmt.Sprintf("node%d.test", id) }
	for id := uint64(1); id <= 3; id++ {
		cfg := nodeConfig(t, id, c.net)
		_, port, _ := net.SplitHostPort(cfg.PeerAddr)
		cfg.AdvertisePeerAddr = net.JoinHostPort(name(id), port)
		cfg.AdvertiseClientAddr = net.JoinHostPort(name(id), "6379")
		cfg.PeerDial = hosts.dial
		hosts.set(name(id), "127.0.0.1")
		if id > 1 {
			cfg.Join = c.cfgs[1].AdvertisePeerAddr
		}
		c.cfgs[id] = cfg
	}
	c.start(1)
	c.waitLeader()
	c.start(2)
	c.start(3)
	c.waitLeader()

	ctx := testCtx(t, 60*time.Second)
	wantMembers := func(n *Node) error {
		st := n.Status()
		if len(st.Members) != 3 {
			return fmt.Errorf("node %d lists %d members: %+v", n.ID(), len(st.Members), st.Members)
		}
		for _, m := range st.Members {
			if want := c.cfgs[m.ID].AdvertisePeerAddr; m.PeerAddr != want || m.Learner {
				return fmt.Errorf("node %d lists member %+v; want a voter at %s", n.ID(), m, want)
			}
		}
		return nil
	}
	waitTrue(t, 15*time.Second, "every node lists the members at their names", func() bool {
		for id := uint64(1); id <= 3; id++ {
			if wantMembers(c.node(id)) != nil {
				return false
			}
		}
		return true
	})
	st := c.node(2).Status()
	if st.PeerAddr != c.cfgs[2].AdvertisePeerAddr || st.PeerListenAddr != c.cfgs[2].PeerAddr ||
		st.ClientAddr != c.cfgs[2].AdvertiseClientAddr || st.ClientListenAddr != c.cfgs[2].ClientAddr {
		t.Fatalf("node 2 status addresses: peer %q (listen %q), client %q (listen %q)", st.PeerAddr, st.PeerListenAddr, st.ClientAddr, st.ClientListenAddr)
	}
	if err := c.client(2).Set(ctx, "before", "restart", 0).Err(); err != nil {
		t.Fatalf("SET through node 2: %v", err)
	}
	cluster := st.ClusterID

	// Node 2 restarts at 127.0.0.2, its name following it.
	c.stop(2)
	cfg := c.cfgs[2]
	for _, a := range []*string{&cfg.PeerAddr, &cfg.ClientAddr} {
		_, port, _ := net.SplitHostPort(*a)
		*a = net.JoinHostPort("127.0.0.2", port)
	}
	cfg.ID = 0 // read from the data directory
	c.cfgs[2] = cfg
	hosts.set(name(2), "127.0.0.2")
	c.start(2)
	n2 := c.node(2)
	if n2.ID() != 2 || n2.Status().ClusterID != cluster {
		t.Fatalf("restarted node is %d of cluster %x; want 2 of %x", n2.ID(), n2.Status().ClusterID, cluster)
	}
	c.waitLeader()
	if err := c.client(2).Set(ctx, "after", "restart", 0).Err(); err != nil {
		t.Fatalf("SET through node 2 after the restart: %v", err)
	}
	for id := uint64(1); id <= 3; id++ {
		cl := c.client(id)
		waitTrue(t, 15*time.Second, fmt.Sprintf("node %d has both writes", id), func() bool {
			a, err1 := cl.Get(ctx, "after").Result()
			b, err2 := cl.Get(ctx, "before").Result()
			return err1 == nil && err2 == nil && a == "restart" && b == "restart"
		})
		if err := wantMembers(c.node(id)); err != nil {
			t.Fatal(err)
		}
	}
	if hosts.dialed("127.0.0.2") == 0 {
		t.Fatal("no node dialed node 2 at its new IP")
	}
	// A write on node 2's behalf from a node that leads elsewhere reaches it
	// too: make node 2 lead, then write through node 1.
	if err := c.node(1).TransferLeader(ctx, 2); err != nil {
		t.Fatalf("transfer leadership to node 2: %v", err)
	}
	if err := c.client(1).Set(ctx, "via", "leader2", 0).Err(); err != nil {
		t.Fatalf("SET through node 1 with node 2 leading: %v", err)
	}
	waitTrue(t, 15*time.Second, "node 3 has the write led by node 2", func() bool {
		v, err := c.client(3).Get(ctx, "via").Result()
		return err == nil && v == "leader2"
	})
}

func waitTrue(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestAdvertiseValidation(t *testing.T) {
	base := func() Config {
		c := Config{ID: 1, DataDir: "/d"}
		c.EnsureDefaults()
		return c
	}
	for _, tc := range []struct {
		name   string
		adjust func(*Config)
		want   string // "" = valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"names", func(c *Config) { c.AdvertisePeerAddr, c.AdvertiseClientAddr = "kv1:7379", "kv1.example:6379" }, ""},
		{"peer wildcard", func(c *Config) { c.AdvertisePeerAddr = "0.0.0.0:7379" }, "advertise an address others can dial"},
		{"peer v6 wildcard", func(c *Config) { c.AdvertisePeerAddr = "[::]:7379" }, "advertise an address others can dial"},
		{"peer no host", func(c *Config) { c.AdvertisePeerAddr = ":7379" }, "advertise an address others can dial"},
		{"peer port 0", func(c *Config) { c.AdvertisePeerAddr = "kv1:0" }, "invalid port"},
		{"peer not host:port", func(c *Config) { c.AdvertisePeerAddr = "kv1" }, "not HOST:PORT"},
		{"client wildcard", func(c *Config) { c.AdvertiseClientAddr = "0.0.0.0:6379" }, "--advertise-client-addr"},
		{"client port off", func(c *Config) {
			c.ClientAddr, c.TLSClientAddr, c.TLSCertFile, c.TLSKeyFile, c.AdvertiseClientAddr = "-", ":6380", "c", "k", "kv1:6379"
		}, "plain-text client port"},
		{"join on wildcard", func(c *Config) { c.PeerAddr, c.Join = "0.0.0.0:7379", "kv2:7379" }, "--advertise-peer-addr"},
		{"join on wildcard advertised", func(c *Config) { c.PeerAddr, c.Join, c.AdvertisePeerAddr = "0.0.0.0:7379", "kv2:7379", "kv1:7379" }, ""},
		{"initial cluster differs", func(c *Config) {
			c.InitialCluster = map[uint64]string{1: "kv1:7379", 2: "kv2:7379"}
			c.AdvertisePeerAddr = "other:7379"
		}, "differs from this node's --initial-cluster entry"},
		{"initial cluster same", func(c *Config) {
			c.InitialCluster = map[uint64]string{1: "kv1:7379", 2: "kv2:7379"}
			c.PeerAddr, c.AdvertisePeerAddr = "0.0.0.0:7379", "kv1:7379"
		}, ""},
	} {
		c := base()
		tc.adjust(&c)
		err := c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v; want an error with %q", tc.name, err, tc.want)
		}
	}
}
