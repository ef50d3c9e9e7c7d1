package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
)

// Ports every node uses inside its own namespace.
const (
	netnsClientPort = 6379
	netnsPeerPort   = 7379
	netnsAdminPort  = 8379
)

// Cut mechanisms of the netns mode.
const (
	cutIptables = "iptables"
	cutRoute    = "route"
)

// netnsNet runs node i in network namespace kvc<run>-<i> with address
// <subnet>.i on its eth0. The eth0s are veths into a bridge that lives in
// a namespace of its own, kvc<run>-hub, so bridged traffic never meets the
// host's firewall (a host with Docker has FORWARD policy DROP, which
// br_netfilter applies to bridged frames). The chaos process, in the root
// namespace, reaches the bridge through one more veth, kvc<run>h, with
// address <subnet>.254: clients and the admin API go that way, and no
// partition ever touches it.
//
// A cut from a to b is made inside a's namespace: iptables drops what a
// sends to b's peer port, so the connections a opened to b carry nothing
// (like a real partition, nothing is refused: packets vanish) while b's
// connections to a are untouched. Where iptables does not work the cut is
// a policy route to a blackhole for the same packets (a's sends then fail
// at once rather than time out).
type netnsNet struct {
	run    string // run id: the chaos process id in hex
	n      int
	prefix string // "10.213.7."
	cutBy  string // cutIptables or cutRoute
	logf   func(format string, args ...any)

	nsCreated []string // namespaces created, for teardown
	rootVeth  string
	closed    bool
}

var netnsNameRE = regexp.MustCompile(`^kvc([0-9a-f]+)-(hub|[0-9]+)$`)

func (m *netnsNet) nsName(i int) string { return fmt.Sprintf("kvc%s-%d", m.run, i) }
func (m *netnsNet) hubName() string     { return fmt.Sprintf("kvc%s-hub", m.run) }
func (m *netnsNet) ip(i int) string     { return m.prefix + strconv.Itoa(i) }
func (m *netnsNet) rootIP() string      { return m.prefix + "254" }

// netnsUsable reports why the netns mode cannot run here, or nil.
func netnsUsable() error {
	if os.Geteuid() != 0 {
		return errors.New("not running as root (network namespaces need CAP_SYS_ADMIN)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("the ip command (iproute2) is not installed")
	}
	if err := run(context.Background(), "ip", "netns", "list"); err != nil {
		return fmt.Errorf("ip netns does not work: %v", err)
	}
	return nil
}

// newNetns creates the namespaces, bridge and veths for n nodes. subnet is
// "A.B.C.0/24" or "" to pick a free 10.213.x.0/24. cutBy forces a cut
// mechanism ("" picks iptables if it works). On error everything created
// is removed.
func newNetns(ctx context.Context, n int, subnet, cutBy string, logf func(string, ...any)) (_ *netnsNet, err error) {
	if err := netnsUsable(); err != nil {
		return nil, err
	}
	m := &netnsNet{run: strconv.FormatInt(int64(os.Getpid()), 16), n: n, logf: logf}
	cleanStaleNetns(ctx, m.run, logf)
	if subnet == "" {
		if m.prefix, err = pickSubnet(ctx); err != nil {
			return nil, err
		}
	} else if m.prefix, err = subnetPrefix(subnet); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = m.close()
		}
	}()
	hub := m.hubName()
	m.rootVeth = fmt.Sprintf("kvc%sh", m.run)
	steps := [][]string{
		{"netns", "add", hub},
	}
	if err := m.ipAll(ctx, steps); err != nil {
		return nil, err
	}
	m.nsCreated = append(m.nsCreated, hub)
	steps = [][]string{
		{"-n", hub, "link", "set", "lo", "up"},
		{"-n", hub, "link", "add", "br0", "type", "bridge"},
		{"-n", hub, "link", "set", "br0", "up"},
		{"link", "add", m.rootVeth, "type", "veth", "peer", "name", "up0", "netns", hub},
		{"-n", hub, "link", "set", "up0", "master", "br0"},
		{"-n", hub, "link", "set", "up0", "up"},
		{"addr", "add", m.rootIP() + "/24", "dev", m.rootVeth},
		{"link", "set", m.rootVeth, "up"},
	}
	if err := m.ipAll(ctx, steps); err != nil {
		return nil, err
	}
	for i := 1; i <= n; i++ {
		ns := m.nsName(i)
		if err := run(ctx, "ip", "netns", "add", ns); err != nil {
			return nil, err
		}
		m.nsCreated = append(m.nsCreated, ns)
		port := fmt.Sprintf("n%d", i)
		if err := m.ipAll(ctx, [][]string{
			{"-n", ns, "link", "set", "lo", "up"},
			{"-n", hub, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns},
			{"-n", hub, "link", "set", port, "master", "br0"},
			{"-n", hub, "link", "set", port, "up"},
			{"-n", ns, "addr", "add", m.ip(i) + "/24", "dev", "eth0"},
			{"-n", ns, "link", "set", "eth0", "up"},
		}); err != nil {
			return nil, err
		}
	}
	m.cutBy = cutBy
	if m.cutBy == "" {
		m.cutBy = cutRoute
		if m.iptables(ctx, 1, "-A", m.ip(1), 1) == nil && m.iptables(ctx, 1, "-D", m.ip(1), 1) == nil {
			m.cutBy = cutIptables
		}
	}
	if m.cutBy == cutRoute {
		for a := 1; a <= n; a++ {
			for b := 1; b <= n; b++ {
				if a != b {
					if err := run(ctx, "ip", "-n", m.nsName(a), "route", "add", "blackhole", m.ip(b)+"/32", "table", strconv.Itoa(100+b)); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	return m, nil
}

func (m *netnsNet) ipAll(ctx context.Context, steps [][]string) error {
	for _, s := range steps {
		if err := run(ctx, "ip", s...); err != nil {
			return err
		}
	}
	return nil
}

// iptables adds (-A) or deletes (-D) the rule dropping what node from
// sends to toIP's port.
func (m *netnsNet) iptables(ctx context.Context, from int, op, toIP string, port int) error {
	return run(ctx, "ip", "netns", "exec", m.nsName(from), "iptables", "-w", op, "OUTPUT",
		"-d", toIP+"/32", "-p", "tcp", "--dport", strconv.Itoa(port), "-j", "DROP")
}

func (m *netnsNet) mode() string { return ModeNetns }

func (m *netnsNet) describe() string {
	how := "iptables DROP (inside the sender's namespace) of what it sends to the peer port"
	if m.cutBy == cutRoute {
		how = "policy route to a blackhole (inside the sender's namespace) for what it sends to the peer port; iptables did not work"
	}
	return fmt.Sprintf("node i in namespace kvc%s-i at %si (bridge in kvc%s-hub; clients from %s); cuts: %s",
		m.run, m.prefix, m.run, m.rootIP(), how)
}

func (m *netnsNet) addrs(i int) nodeAddrs {
	ip := m.ip(i)
	return nodeAddrs{
		Client:         net.JoinHostPort(ip, strconv.Itoa(netnsClientPort)),
		PeerListen:     net.JoinHostPort(ip, strconv.Itoa(netnsPeerPort)),
		PeerAdvertised: net.JoinHostPort(ip, strconv.Itoa(netnsPeerPort)),
		Admin:          net.JoinHostPort(ip, strconv.Itoa(netnsAdminPort)),
	}
}

// command runs bin inside node i's namespace. ip netns exec execs the
// program, so the process started is the node itself (startNode checks).
func (m *netnsNet) command(i int, bin string, args []string) *exec.Cmd {
	cmd := exec.Command("ip", append([]string{"netns", "exec", m.nsName(i), bin}, args...)...)
	cmd.SysProcAttr = nodeSysProcAttr()
	return cmd
}

func (m *netnsNet) setPID(int, int) {}

func (m *netnsNet) cut(from, to int) error  { return m.cutOp(from, to, true) }
func (m *netnsNet) heal(from, to int) error { return m.cutOp(from, to, false) }

func (m *netnsNet) cutOp(from, to int, add bool) error {
	ctx := context.Background()
	if m.cutBy == cutIptables {
		op := "-D"
		if add {
			op = "-A"
		}
		return m.iptables(ctx, from, op, m.ip(to), netnsPeerPort)
	}
	pref := strconv.Itoa(1000 + to)
	if add {
		return run(ctx, "ip", "-n", m.nsName(from), "rule", "add", "to", m.ip(to)+"/32", "ipproto", "tcp",
			"dport", strconv.Itoa(netnsPeerPort), "lookup", strconv.Itoa(100+to), "pref", pref)
	}
	return run(ctx, "ip", "-n", m.nsName(from), "rule", "del", "pref", pref)
}

// close kills whatever still runs in the namespaces and deletes them and
// the root veth.
func (m *netnsNet) close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	ctx := context.Background()
	var errs []error
	if m.rootVeth != "" {
		_ = run(ctx, "ip", "link", "del", m.rootVeth) // gone already if the hub never got it
	}
	for i := len(m.nsCreated) - 1; i >= 0; i-- {
		ns := m.nsCreated[i]
		killNetnsPids(ctx, ns)
		if err := run(ctx, "ip", "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func killNetnsPids(ctx context.Context, ns string) {
	out, err := output(ctx, "ip", "netns", "pids", ns)
	if err != nil {
		return
	}
	for _, f := range strings.Fields(out) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// cleanStaleNetns removes namespaces left by chaos runs that died without
// tearing down: those of a run id equal to ours (a previous process with
// our pid) or whose process is gone or is no longer a chaos run.
// Namespaces of live chaos runs are left alone.
func cleanStaleNetns(ctx context.Context, self string, logf func(string, ...any)) {
	out, err := output(ctx, "ip", "netns", "list")
	if err != nil {
		return
	}
	stale := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		name := fields[0]
		sm := netnsNameRE.FindStringSubmatch(name)
		if sm == nil {
			continue
		}
		if sm[1] != self && chaosRunAlive(sm[1]) {
			continue
		}
		stale[sm[1]] = append(stale[sm[1]], name)
	}
	for runID, names := range stale {
		_ = exec.CommandContext(ctx, "ip", "link", "del", fmt.Sprintf("kvc%sh", runID)).Run()
		for _, ns := range names {
			killNetnsPids(ctx, ns)
			if err := run(ctx, "ip", "netns", "del", ns); err == nil {
				logf("removed stale network namespace %s (left by a chaos run that did not clean up)", ns)
			}
		}
	}
}

// chaosRunAlive reports whether process hexPID is alive and a chaos run.
func chaosRunAlive(hexPID string) bool {
	pid, err := strconv.ParseInt(hexPID, 16, 64)
	if err != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	return strings.Contains(string(b), "chaos")
}

// subnetPrefix turns "A.B.C.0/24" into "A.B.C.".
func subnetPrefix(s string) (string, error) {
	ip, ipnet, err := net.ParseCIDR(s)
	if err != nil {
		return "", fmt.Errorf("--subnet %q: %v", s, err)
	}
	ip4 := ip.To4()
	ones, bits := ipnet.Mask.Size()
	if ip4 == nil || bits != 32 || ones != 24 {
		return "", fmt.Errorf("--subnet %q: want an IPv4 /24 such as 10.213.7.0/24", s)
	}
	return fmt.Sprintf("%d.%d.%d.", ip4[0], ip4[1], ip4[2]), nil
}

// ValidateSubnet checks a --subnet value.
func ValidateSubnet(s string) error {
	_, err := subnetPrefix(s)
	return err
}

// pickSubnet chooses a 10.213.x.0/24 that no address or route of the root
// namespace uses, starting from one derived from our pid so that parallel
// runs tend to pick different ones.
func pickSubnet(ctx context.Context) (string, error) {
	addrs, err := output(ctx, "ip", "-4", "-o", "addr", "show")
	if err != nil {
		return "", err
	}
	routes, err := output(ctx, "ip", "-4", "route", "show", "table", "all")
	if err != nil {
		return "", err
	}
	used := addrs + "\n" + routes
	start := os.Getpid() % 250
	for k := 0; k < 250; k++ {
		p := fmt.Sprintf("10.213.%d.", 1+(start+k)%250)
		if !strings.Contains(used, p) {
			return p, nil
		}
	}
	return "", errors.New("no free 10.213.x.0/24 subnet; give one with --subnet")
}
