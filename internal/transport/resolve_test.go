package transport

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeResolver maps host names to IPs that a test changes, as a DNS server
// or /etc/hosts of a container network changes when a container restarts
// with a new IP. Dial resolves the name at every call.
type fakeResolver struct {
	mu    sync.Mutex
	hosts map[string]string
	dials map[string]int // by the IP dialed
}

func (r *fakeResolver) set(host, ip string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hosts[host] = ip
}

func (r *fakeResolver) dialed(ip string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dials[ip]
}

func (r *fakeResolver) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if ip, ok := r.hosts[host]; ok {
		host = ip
	}
	r.dials[host]++
	r.mu.Unlock()
	var d net.Dialer
	return d.DialContext(ctx, network, net.JoinHostPort(host, port))
}

// A peer known by a host name is dialed by name at each dial: when it
// restarts at another IP under the same name, the broken connection is
// replaced by one to the new IP, for raft messages, calls and pipelined
// calls, without SetPeer.
func TestPeerNameResolvedAtEachDial(t *testing.T) {
	checkLeaks(t)
	res := &fakeResolver{hosts: map[string]string{}, dials: map[string]int{}}
	a := startNode(t, 1, "", newRecorder(), Config{Dial: res.Dial}, nil)
	b := startNode(t, 2, "127.0.0.1:0", newRecorder(), Config{}, nil)
	_, port, _ := net.SplitHostPort(b.addr)
	res.set("node2.test", "127.0.0.1")
	a.t.SetPeer(2, net.JoinHostPort("node2.test", port))

	a.t.Send(ofRange1(heartbeat(1, 2)))
	waitFor(t, "first message", func() bool { return b.rec.count() == 1 })
	if out, err := a.t.CallPipelined(context.Background(), 2, "m", nil); err != nil || string(out) != "m:" {
		t.Fatalf("pipelined call: %q %v", out, err)
	}

	// Node 2 restarts in a "new container": same name and port, new IP.
	b.stop(t)
	b2 := startNode(t, 2, net.JoinHostPort("127.0.0.2", port), newRecorder(), Config{}, nil)
	res.set("node2.test", "127.0.0.2")
	waitFor(t, "message at the new IP", func() bool {
		a.t.Send(ofRange1(heartbeat(1, 2)))
		time.Sleep(10 * time.Millisecond)
		return b2.rec.count() > 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	waitFor(t, "call at the new IP", func() bool {
		out, err := a.t.Call(ctx, 2, "m", nil)
		return err == nil && string(out) == "m:"
	})
	waitFor(t, "pipelined call at the new IP", func() bool {
		out, err := a.t.CallPipelined(ctx, 2, "m", nil)
		return err == nil && string(out) == "m:"
	})
	if res.dialed("127.0.0.2") == 0 {
		t.Fatal("nothing dialed 127.0.0.2")
	}
	a.t.mu.RLock()
	p := a.t.peers[2]
	a.t.mu.RUnlock()
	if got := p.getAddr(); !strings.HasPrefix(got, "node2.test:") {
		t.Fatalf("peer address became %q; want the name kept", got)
	}
}
