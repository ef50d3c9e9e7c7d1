package chaos

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// proxyNet runs every node on 127.0.0.1 and puts a TCP proxy, owned by
// the chaos process, in front of each node's peer listener: node j listens
// for peers on a hidden port, and every node (j included) is told in
// --initial-cluster that j lives at j's proxy. All nodes get the same
// --initial-cluster, so the cluster's configuration is exactly what a real
// deployment would have (per-pair proxy addresses would differ between
// nodes, and a node adopts the sender's peer addresses when it installs a
// snapshot, which would silently reroute traffic).
//
// A proxy knows the destination from the port it listens on; it finds the
// source by looking up which node process owns the other end of the
// accepted connection (/proc/net/tcp gives the socket's inode,
// /proc/<pid>/fd the process holding it). So cuts are per (source,
// destination) pair, one-way cuts included. A cut closes the pair's open
// connections and blackholes new ones: they are accepted and then neither
// forwarded nor answered until the cut heals, when they are closed so the
// node dials again. A connection whose source cannot be identified is cut
// only when its destination is cut from every other node.
type proxyNet struct {
	n       int
	addr    []nodeAddrs // 1-based
	proxies []net.Listener

	mu      sync.Mutex
	pids    map[int]int // node -> pid
	cuts    map[[2]int]bool
	conns   map[*proxyConn]struct{}
	closed  bool
	wg      sync.WaitGroup
	unknown atomic.Int64 // connections whose source was not identified
}

type proxyConn struct {
	src, dst   int // src 0: unknown
	down, up   net.Conn
	held       bool
	closeOnce  sync.Once
	heldSignal chan struct{}
}

func (c *proxyConn) close() {
	c.closeOnce.Do(func() {
		_ = c.down.Close()
		if c.up != nil {
			_ = c.up.Close()
		}
		close(c.heldSignal)
	})
}

// newProxy reserves ports on 127.0.0.1 for n nodes and starts the proxies.
func newProxy(n int) (_ *proxyNet, err error) {
	p := &proxyNet{n: n, addr: make([]nodeAddrs, n+1), proxies: make([]net.Listener, n+1),
		pids: map[int]int{}, cuts: map[[2]int]bool{}, conns: map[*proxyConn]struct{}{}}
	defer func() {
		if err != nil {
			_ = p.close()
		}
	}()
	for i := 1; i <= n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		p.proxies[i] = l
		ports, err := freePorts(3)
		if err != nil {
			return nil, err
		}
		p.addr[i] = nodeAddrs{Client: ports[0], PeerListen: ports[1], Admin: ports[2], PeerAdvertised: l.Addr().String()}
	}
	for i := 1; i <= n; i++ {
		p.wg.Add(1)
		go p.serve(i)
	}
	return p, nil
}

// freePorts returns k distinct free 127.0.0.1 ports (free when checked).
func freePorts(k int) ([]string, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []string
	for range k {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}

func (p *proxyNet) mode() string { return ModeProxy }

func (p *proxyNet) describe() string {
	return "all nodes on 127.0.0.1; a proxy in front of each node's peer port, sources identified through /proc; cuts: close the pair's connections and blackhole new ones"
}

func (p *proxyNet) addrs(i int) nodeAddrs { return p.addr[i] }

func (p *proxyNet) command(i int, bin string, args []string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = nodeSysProcAttr()
	return cmd
}

func (p *proxyNet) setPID(i, pid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pid == 0 {
		delete(p.pids, i)
	} else {
		p.pids[i] = pid
	}
}

// cutLocked reports whether traffic src → dst is cut (src 0: unknown
// source, cut only if every other node is cut from dst).
func (p *proxyNet) cutLocked(src, dst int) bool {
	if src != 0 {
		return p.cuts[[2]int{src, dst}]
	}
	for k := 1; k <= p.n; k++ {
		if k != dst && !p.cuts[[2]int{k, dst}] {
			return false
		}
	}
	return true
}

func (p *proxyNet) cut(from, to int) error {
	p.mu.Lock()
	p.cuts[[2]int{from, to}] = true
	var victims []*proxyConn
	for c := range p.conns {
		if c.dst == to && p.cutLocked(c.src, c.dst) && !c.held {
			victims = append(victims, c)
		}
	}
	p.mu.Unlock()
	for _, c := range victims {
		c.close()
	}
	return nil
}

func (p *proxyNet) heal(from, to int) error {
	p.mu.Lock()
	delete(p.cuts, [2]int{from, to})
	var victims []*proxyConn
	for c := range p.conns {
		if c.dst == to && c.held && !p.cutLocked(c.src, c.dst) {
			victims = append(victims, c)
		}
	}
	p.mu.Unlock()
	for _, c := range victims {
		c.close() // the node dials again, through a healed link
	}
	return nil
}

func (p *proxyNet) serve(dst int) {
	defer p.wg.Done()
	l := p.proxies[dst]
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.handle(dst, c)
	}
}

func (p *proxyNet) handle(dst int, down net.Conn) {
	defer p.wg.Done()
	p.mu.Lock()
	pids := make(map[int]int, len(p.pids))
	for node, pid := range p.pids {
		pids[pid] = node
	}
	p.mu.Unlock()
	src := connOwner(down, pids)
	if src == 0 {
		p.unknown.Add(1)
	}
	c := &proxyConn{src: src, dst: dst, down: down, heldSignal: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		down.Close()
		return
	}
	p.conns[c] = struct{}{}
	c.held = p.cutLocked(src, dst)
	p.mu.Unlock()
	defer func() {
		c.close()
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	if c.held {
		<-c.heldSignal // blackholed until healed or closed
		return
	}
	up, err := net.DialTimeout("tcp", p.addr[dst].PeerListen, time.Second)
	if err != nil {
		return // the node is down: the dialer sees its connection close
	}
	p.mu.Lock()
	c.up = up
	stillOK := !p.cutLocked(src, dst) && !p.closed
	p.mu.Unlock()
	select {
	case <-c.heldSignal: // closed meanwhile
		up.Close()
		return
	default:
	}
	if !stillOK {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, down); done <- struct{}{} }()
	go func() { _, _ = io.Copy(down, up); done <- struct{}{} }()
	select {
	case <-done:
	case <-c.heldSignal:
	}
}

func (p *proxyNet) close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	var all []*proxyConn
	for c := range p.conns {
		all = append(all, c)
	}
	p.mu.Unlock()
	for _, l := range p.proxies {
		if l != nil {
			l.Close()
		}
	}
	for _, c := range all {
		c.close()
	}
	p.wg.Wait()
	return nil
}

// unidentified is how many proxied connections had no known source.
func (p *proxyNet) unidentified() int64 { return p.unknown.Load() }

// connOwner returns the node (a value of pids: pid -> node) whose process
// holds the other end of c, an accepted TCP connection on this machine,
// or 0.
func connOwner(c net.Conn, pids map[int]int) int {
	remote, ok1 := c.RemoteAddr().(*net.TCPAddr)
	local, ok2 := c.LocalAddr().(*net.TCPAddr)
	if !ok1 || !ok2 || len(pids) == 0 {
		return 0
	}
	// The dialer's socket has local address = our remote, and vice versa.
	for attempt := 0; attempt < 3; attempt++ {
		inode := socketInode(remote, local)
		if inode != "" {
			target := "socket:[" + inode + "]"
			for pid, node := range pids {
				if processHolds(pid, target) {
					return node
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return 0
}

// procAddr formats an address as /proc/net/tcp{,6} do: the address's
// 32-bit words in host byte order, in hex, then the port.
func procAddr(a *net.TCPAddr) (string, bool) {
	ip := a.IP
	var b strings.Builder
	if ip4 := ip.To4(); ip4 != nil {
		fmt.Fprintf(&b, "%08X", binary.NativeEndian.Uint32(ip4))
		fmt.Fprintf(&b, ":%04X", a.Port)
		return b.String(), false
	}
	ip16 := ip.To16()
	for w := 0; w < 4; w++ {
		fmt.Fprintf(&b, "%08X", binary.NativeEndian.Uint32(ip16[4*w:]))
	}
	fmt.Fprintf(&b, ":%04X", a.Port)
	return b.String(), true
}

// socketInode finds the inode of the TCP socket with the given local and
// remote addresses.
func socketInode(local, remote *net.TCPAddr) string {
	l, v6 := procAddr(local)
	r, _ := procAddr(remote)
	file := "/proc/net/tcp"
	if v6 {
		file = "/proc/net/tcp6"
	}
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
		if len(fs) >= 10 && fs[1] == l && fs[2] == r {
			return fs[9]
		}
	}
	return ""
}

// processHolds reports whether pid has an open fd linking to target.
func processHolds(pid int, target string) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if l, err := os.Readlink(dir + "/" + e.Name()); err == nil && l == target {
			return true
		}
	}
	return false
}

// proxyUsable reports why source identification cannot work here, or nil.
func proxyUsable() error {
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		return errors.New("/proc/net/tcp is not readable: the proxy cannot tell which node a connection comes from")
	}
	return nil
}
