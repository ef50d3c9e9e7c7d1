package lockbench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/kvorum/kvorum/internal/localsrv"
)

// The ZooKeeper target: the fair lock recipe of the ZooKeeper docs, as the
// paper ran it with python kazoo's Lock.
//
//   - One ZooKeeper session per worker process (its timeout is --ttl: how
//     long a crashed holder's znode, and so the lock, outlives it).
//   - The lock is a parent znode, /kvorum-bench/<lock name>, created (as a
//     container node: the server removes it once empty) during setup, like
//     kazoo's Lock creates its path once, before the first acquire.
//   - Acquire: create an ephemeral sequential child (with a random
//     "protected" prefix, like kazoo, so a retried create after a lost
//     connection finds its node); list the children; if ours has the
//     lowest sequence number the lock is held, else watch the child just
//     before ours (not the holder: no herd effect) and look again when it
//     goes. Waiters are served in the order they queued: the fair lock.
//   - Release: delete our child.
//
// The sequence number of the held child increases with every grant of one
// lock (grants go in sequence order), so it serves as the fencing token
// the shared-mode check verifies.

// DefaultZookeeperServer is the server jar of the Debian/Ubuntu zookeeper
// package (apt-get install zookeeper); its manifest names its dependencies.
const DefaultZookeeperServer = "/usr/share/java/zookeeper.jar"

const (
	zkRoot       = "/kvorum-bench"
	zkNodePrefix = "lock-"
	// zkTickTime is the local servers' tickTime: session timeouts are
	// bounded to [2, 20] ticks, i.e. 4s to 40s.
	zkTickTime = 2 * time.Second
)

var zkACL = zk.WorldACL(zk.PermAll)

// zkQuiet discards the client library's log lines (connects, reconnects):
// a worker's stderr is for its errors.
type zkQuiet struct{}

func (zkQuiet) Printf(string, ...any) {}

// zkLockPath is the parent znode of a lock name.
func zkLockPath(lock string) string {
	return zkRoot + "/" + strings.ReplaceAll(lock, ":", "-")
}

// zkConnect opens a session to addrs and waits until it is established.
func zkConnect(ctx context.Context, addrs []string, sessionTimeout time.Duration) (*zk.Conn, error) {
	conn, events, err := zk.Connect(addrs, sessionTimeout, zk.WithLogger(zkQuiet{}), zk.WithLogInfo(false))
	if err != nil {
		return nil, err
	}
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return conn, nil
			}
			if ev.State == zk.StateAuthFailed || ev.State == zk.StateExpired {
				conn.Close()
				return nil, fmt.Errorf("zookeeper %s: session %v", strings.Join(addrs, ","), ev.State)
			}
		case <-ctx.Done():
			conn.Close()
			return nil, fmt.Errorf("zookeeper %s: no session: %w", strings.Join(addrs, ","), ctx.Err())
		}
	}
}

type zkLocker struct {
	conn  *zk.Conn
	path  string // the lock's parent znode
	node  string // our child while held
	tries int64
}

func newZkLocker(ctx context.Context, ws WorkerSpec) (*zkLocker, error) {
	if len(ws.Addrs) == 0 {
		return nil, errors.New("zookeeper worker needs a server address")
	}
	conn, err := zkConnect(ctx, ws.Addrs, ws.TTL)
	if err != nil {
		return nil, err
	}
	z := &zkLocker{conn: conn, path: zkLockPath(ws.Lock)}
	if err := z.ensurePath(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("zookeeper: creating %s: %w", z.path, err)
	}
	return z, nil
}

// ensurePath creates the root and the lock's parent as container znodes
// (an existing one is fine).
func (z *zkLocker) ensurePath() error {
	var err error
	for range 3 { // the server may remove an empty container in between
		for _, p := range []string{zkRoot, z.path} {
			_, err = z.conn.CreateContainer(p, nil, zk.FlagContainer, zkACL)
			if err != nil && !errors.Is(err, zk.ErrNodeExists) {
				break
			}
			err = nil
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return err
		}
	}
	return err
}

// zkSeq is the sequence number the server appended to a child's name.
func zkSeq(name string) (int64, error) {
	i := strings.LastIndex(name, zkNodePrefix)
	if i < 0 {
		return 0, fmt.Errorf("znode %q is no lock node", name)
	}
	n, err := strconv.ParseInt(name[i+len(zkNodePrefix):], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("znode %q has no sequence number", name)
	}
	return n, nil
}

func (z *zkLocker) acquire(ctx context.Context) (token int64, err error) {
	if z.node != "" {
		return 0, errors.New("zookeeper: acquire while holding")
	}
	z.tries++
	var node string
	for i := 0; ; i++ {
		node, err = z.conn.CreateProtectedEphemeralSequential(z.path+"/"+zkNodePrefix, nil, zkACL)
		if errors.Is(err, zk.ErrNoNode) && i < 3 {
			// The parent container was removed while empty.
			if err = z.ensurePath(); err != nil {
				return 0, err
			}
			continue
		}
		if err != nil {
			return 0, err
		}
		break
	}
	defer func() {
		if err != nil { // leave the queue
			_ = z.conn.Delete(node, -1)
		}
	}()
	seq, err := zkSeq(node)
	if err != nil {
		return 0, err
	}
	for {
		children, _, err := z.conn.Children(z.path)
		if err != nil {
			return 0, err
		}
		pred, predSeq, mine := "", int64(-1), false
		for _, c := range children {
			s, err := zkSeq(c)
			if err != nil {
				continue // not a lock node: ignore
			}
			if s == seq {
				mine = true
			} else if s < seq && s > predSeq {
				pred, predSeq = c, s
			}
		}
		if !mine {
			return 0, fmt.Errorf("zookeeper: our node %s is gone (session lost?)", node)
		}
		if pred == "" {
			z.node = node
			return seq, nil
		}
		_, _, ch, err := z.conn.GetW(z.path + "/" + pred)
		if errors.Is(err, zk.ErrNoNode) {
			continue // gone already: look again
		}
		if err != nil {
			return 0, err
		}
		select {
		case ev := <-ch:
			if ev.Err != nil {
				return 0, ev.Err
			}
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

func (z *zkLocker) release(context.Context) error {
	if z.node == "" {
		return errors.New("zookeeper: release without a hold")
	}
	err := z.conn.Delete(z.node, -1)
	z.node = ""
	return err
}

func (z *zkLocker) attempts() int64 { return 0 }

func (z *zkLocker) close() { z.conn.Close() } // ends the session: its znodes go

// zkServer finds how to run a ZooKeeper server: the java command and the
// class path. server is --zookeeper-server: a server jar (default
// DefaultZookeeperServer) or an Apache ZooKeeper installation directory
// (with lib/). When it is not available, why says so (and err is nil
// unless the server was given).
func zkServer(server string) (javaBin, classPath, version, why string, err error) {
	given := server != ""
	if !given {
		server = DefaultZookeeperServer
	}
	st, serr := os.Stat(server)
	if serr != nil {
		if given {
			return "", "", "", "", fmt.Errorf("--zookeeper-server: %w", serr)
		}
		return "", "", "", server + " does not exist, and no --zookeeper addresses were given " +
			"(install ZooKeeper, e.g. apt-get install zookeeper, or pass --zookeeper host:port,...)", nil
	}
	if javaBin, err = exec.LookPath("java"); err != nil {
		return "", "", "", "java is not on PATH, and no --zookeeper addresses were given " +
			"(install a JRE, e.g. apt-get install default-jre-headless, or pass --zookeeper host:port,...)", nil
	}
	if st.IsDir() {
		classPath = filepath.Join(server, "lib", "*") + string(os.PathListSeparator) + filepath.Join(server, "conf")
		version = "ZooKeeper (" + server + ")"
	} else {
		classPath = server
		// The Debian jar's manifest has no logging backend: log simply to
		// stderr (the server's log file).
		if s := filepath.Join(filepath.Dir(server), "slf4j-simple.jar"); fileExists(s) {
			classPath += string(os.PathListSeparator) + s
		}
		version = zkJarVersion(server)
	}
	return javaBin, classPath, version, "", nil
}

// zkJarVersion names a server jar by its version where the file name
// gives it: zookeeper-3.8.0.jar itself or a zookeeper-<version>.jar beside
// it that is the same file (Debian: a symlink to zookeeper.jar).
func zkJarVersion(jar string) string {
	real, err := filepath.EvalSymlinks(jar)
	if err != nil {
		real = jar
	}
	name := func(p string) string { return strings.TrimSuffix(filepath.Base(p), ".jar") }
	if v, ok := strings.CutPrefix(name(real), "zookeeper-"); ok && v != "" && v[0] >= '0' && v[0] <= '9' {
		return "ZooKeeper " + v
	}
	sibs, _ := filepath.Glob(filepath.Join(filepath.Dir(jar), "zookeeper-[0-9]*.jar"))
	for _, s := range sibs {
		if r, err := filepath.EvalSymlinks(s); err == nil && r == real {
			return "ZooKeeper " + strings.TrimPrefix(name(s), "zookeeper-")
		}
	}
	return "ZooKeeper (" + jar + ")"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// zkConfig is a server's zoo.cfg. peers are the ensemble's "quorum:election"
// address pairs (none: standalone).
func zkConfig(dataDir, clientAddr string, peers [][2]string) string {
	host, port, _ := net.SplitHostPort(clientAddr)
	var b strings.Builder
	fmt.Fprintf(&b, "tickTime=%d\ninitLimit=10\nsyncLimit=5\n", zkTickTime.Milliseconds())
	fmt.Fprintf(&b, "dataDir=%s\nclientPort=%s\nclientPortAddress=%s\n", dataDir, port, host)
	// forceSync=yes is ZooKeeper's default: a write is fsynced to the
	// transaction log before it is acknowledged (kvorum fsyncs too).
	b.WriteString("forceSync=yes\nmaxClientCnxns=0\nadmin.enableServer=false\n")
	b.WriteString("4lw.commands.whitelist=srvr,ruok\nautopurge.snapRetainCount=3\n")
	for i, p := range peers {
		qh, qp, _ := net.SplitHostPort(p[0])
		_, ep, _ := net.SplitHostPort(p[1])
		fmt.Fprintf(&b, "server.%d=%s:%s:%s\n", i+1, qh, qp, ep)
	}
	return b.String()
}

// zkEnsemble starts n ZooKeeper servers (n = 1: standalone; else an
// ensemble on 127.0.0.1) under dir and waits until each one serves a
// session. It returns their client addresses.
func zkEnsemble(ctx context.Context, javaBin, classPath, dir string, n int) (addrs []string, procs []*localsrv.Child, err error) {
	defer func() {
		if err != nil {
			_ = localsrv.StopAll(procs)
			procs = nil
		}
	}()
	var peers [][2]string
	for i := 0; i < n; i++ {
		a, err := localsrv.FreeAddr()
		if err != nil {
			return nil, nil, err
		}
		addrs = append(addrs, a)
		if n > 1 {
			q, err := localsrv.FreeAddr()
			if err != nil {
				return nil, nil, err
			}
			e, err := localsrv.FreeAddr()
			if err != nil {
				return nil, nil, err
			}
			peers = append(peers, [2]string{q, e})
		}
	}
	for i := 1; i <= n; i++ {
		zdir := filepath.Join(dir, fmt.Sprintf("zookeeper-%d", i))
		if err := os.MkdirAll(zdir, 0o755); err != nil {
			return nil, procs, err
		}
		if err := os.WriteFile(filepath.Join(zdir, "myid"), []byte(fmt.Sprintf("%d\n", i)), 0o644); err != nil {
			return nil, procs, err
		}
		cfg := zdir + ".cfg"
		if err := os.WriteFile(cfg, []byte(zkConfig(zdir, addrs[i-1], peers)), 0o644); err != nil {
			return nil, procs, err
		}
		c, err := localsrv.Start(fmt.Sprintf("zookeeper %d", i), zdir+".log", javaBin,
			"-Xms64m", "-Xmx512m", "-Dzookeeper.log.dir="+dir, "-Dorg.slf4j.simpleLogger.showDateTime=true",
			"-cp", classPath, "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg)
		if err != nil {
			return nil, procs, err
		}
		procs = append(procs, c)
	}
	// Serving: a session can be opened on every server (on an ensemble,
	// only once a leader was elected and the server synced with it).
	deadline := time.Now().Add(60 * time.Second)
	for i, a := range addrs {
		for {
			select {
			case <-procs[i].Exited():
				return nil, procs, procs[i].ExitedError()
			default:
			}
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			conn, err := zkConnect(cctx, []string{a}, 4*zkTickTime)
			cancel()
			if err == nil {
				conn.Close()
				break
			}
			if ctx.Err() != nil {
				return nil, procs, ctx.Err()
			}
			if time.Now().After(deadline) {
				return nil, procs, fmt.Errorf("zookeeper %s serves no session within 60s: %v (log %s)", a, err, procs[i].Log)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return addrs, procs, nil
}

// zkWait checks that a given server serves a session.
func zkWait(ctx context.Context, addr string) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := zkConnect(cctx, []string{addr}, 4*zkTickTime)
	if err != nil {
		return err
	}
	conn.Close()
	return nil
}
