package kvbench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/kvorum/kvorum/internal/localsrv"
)

// DefaultEtcd is where Debian's etcd-server package installs etcd.
const DefaultEtcd = "/usr/bin/etcd"

// startServer starts the servers of the --start name under dir. A missing
// binary is not an error: skipped says why, and the target is left out.
func startServer(ctx context.Context, cfg *Config, name, dir string, progress io.Writer) (t Target, note, skipped string, procs []*localsrv.Child, err error) {
	t = Target{Name: name, Scheme: SchemeRedis}
	start := time.Now()
	switch name {
	case StartKvorum:
		fmt.Fprintf(progress, "kvorum: starting a local 3-node cluster ('%s start', data and logs in %s)\n", cfg.Executable, dir)
		t.Addrs, procs, err = localsrv.KvorumCluster(ctx, cfg.Executable, dir)
		note = "3-node cluster of this binary: every write fsynced on a majority; reads linearizable (leader lease, else ReadIndex)"
		if err == nil && cfg.KvorumNodes == KvorumNodesLeader {
			var leader string
			if leader, err = kvorumLeader(ctx, t.Addrs); err == nil {
				t.Addrs = []string{leader}
				note += "; clients on the leader only"
			}
		} else if err == nil {
			note += "; clients spread over the 3 nodes"
		}
	case StartRedis, StartRedisAOF:
		bin := cfg.RedisServer
		if bin == "" {
			if bin, err = exec.LookPath("redis-server"); err != nil {
				return t, "", "redis-server is not on PATH (install it: apt-get install redis-server; or give --redis-server PATH)", nil, nil
			}
		} else if _, err = os.Stat(bin); err != nil {
			return t, "", fmt.Sprintf("redis-server %s: %v", bin, err), nil, nil
		}
		var extra []string
		note = "redis-server, no persistence"
		if name == StartRedisAOF {
			extra = []string{"--appendonly", "yes", "--appendfsync", "always"}
			note = "redis-server, appendonly yes, appendfsync always: every write fsynced before the reply"
		}
		fmt.Fprintf(progress, "%s: starting redis-server (%s, %s)\n", name, bin, strings.TrimPrefix(note, "redis-server, "))
		t.Addrs, procs, err = localsrv.RedisServers(ctx, bin, dir, name, 1, extra...)
	case StartEtcd:
		bin := cfg.EtcdBin
		if bin == "" {
			bin = DefaultEtcd
			if _, serr := os.Stat(bin); serr != nil {
				if bin, err = exec.LookPath("etcd"); err != nil {
					return t, "", "etcd is not installed (" + DefaultEtcd + " nor on PATH; apt-get install etcd-server, or give --etcd PATH)", nil, nil
				}
			}
		} else if _, err = os.Stat(bin); err != nil {
			return t, "", fmt.Sprintf("etcd %s: %v", bin, err), nil, nil
		}
		t.Scheme = SchemeEtcd
		fmt.Fprintf(progress, "etcd: starting a local 3-member cluster (%s, data and logs in %s)\n", bin, dir)
		t.Addrs, procs, err = etcdCluster(ctx, bin, dir, 3)
		note = "3-member cluster, " + etcdVersion(bin) + ", default settings: every write fsynced on a majority; Range linearizable; clients spread over the members"
	}
	if err != nil {
		return t, "", "", nil, err
	}
	for _, p := range procs {
		t.PIDs = append(t.PIDs, p.Pid())
	}
	fmt.Fprintf(progress, "%s: ready in %v at %s\n", name, time.Since(start).Round(10*time.Millisecond), strings.Join(t.Addrs, ","))
	return t, note, "", procs, nil
}

// kvorumLeader finds the node whose INFO replication says raft_role:leader.
func kvorumLeader(ctx context.Context, addrs []string) (string, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, a := range addrs {
			c, err := dialRESP(ctx, a, nil)
			if err != nil {
				continue
			}
			info, err := c.do("INFO", "replication")
			c.close()
			if err == nil && strings.Contains(info, "raft_role:leader") {
				return a, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return "", fmt.Errorf("no kvorum node among %v says raft_role:leader", addrs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func etcdVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "etcd"
	}
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "etcd Version: "); ok {
			return "etcd " + strings.TrimSpace(v)
		}
	}
	return "etcd"
}

// etcdCluster starts an n-member etcd cluster on 127.0.0.1, each member
// with its own data directory under dir, and waits until every member
// reports the same leader.
func etcdCluster(ctx context.Context, bin, dir string, n int) (addrs []string, procs []*localsrv.Child, err error) {
	defer func() {
		if err != nil {
			_ = localsrv.StopAll(procs)
			procs = nil
		}
	}()
	peers := make([]string, n)
	var initial []string
	for i := range n {
		if peers[i], err = localsrv.FreeAddr(); err != nil {
			return nil, nil, err
		}
		a, err := localsrv.FreeAddr()
		if err != nil {
			return nil, nil, err
		}
		addrs = append(addrs, a)
		initial = append(initial, fmt.Sprintf("etcd-%d=http://%s", i+1, peers[i]))
	}
	token := fmt.Sprintf("kvbench-%d-%d", os.Getpid(), time.Now().UnixNano())
	for i := range n {
		name := fmt.Sprintf("etcd-%d", i+1)
		c, err := localsrv.Start("etcd member "+fmt.Sprint(i+1), filepath.Join(dir, name+".log"), bin,
			"--name", name, "--data-dir", filepath.Join(dir, name),
			"--listen-client-urls", "http://"+addrs[i], "--advertise-client-urls", "http://"+addrs[i],
			"--listen-peer-urls", "http://"+peers[i], "--initial-advertise-peer-urls", "http://"+peers[i],
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", token, "--logger", "zap", "--log-level", "warn")
		if err != nil {
			return nil, procs, err
		}
		procs = append(procs, c)
	}
	cli, err := newEtcdClient(ctx, addrs...)
	if err != nil {
		return nil, procs, err
	}
	defer cli.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var why string
		var lead uint64
		for i, a := range addrs {
			select {
			case <-procs[i].Exited():
				return nil, procs, procs[i].ExitedError()
			default:
			}
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			st, err := cli.Status(sctx, "http://"+a)
			cancel()
			switch {
			case err != nil:
				why = fmt.Sprintf("member %d: %v", i+1, err)
			case st.Leader == 0:
				why = fmt.Sprintf("member %d has no leader", i+1)
			case lead != 0 && st.Leader != lead:
				why = "members disagree on the leader"
			default:
				lead = st.Leader
			}
			if why != "" {
				break
			}
		}
		if why == "" {
			return addrs, procs, nil
		}
		if time.Now().After(deadline) {
			return nil, procs, fmt.Errorf("local etcd cluster not ready within 30s: %s (logs in %s)", why, dir)
		}
		select {
		case <-ctx.Done():
			return nil, procs, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
