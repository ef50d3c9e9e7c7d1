package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/admin"
	"github.com/kvorum/kvorum/internal/server"
)

// runCmd runs the CLI and returns exit code, stdout and stderr.
func runCmd(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestTopLevel(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		code, out, _ := runCmd(args...)
		if code != 0 {
			t.Errorf("%v: exit %d", args, code)
		}
		for _, c := range []string{"start", "demo", "ctl", "import", "version", "help"} {
			if !strings.Contains(out, "  "+c+" ") {
				t.Errorf("%v: usage lacks command %q:\n%s", args, c, out)
			}
		}
	}
	code, out, errOut := runCmd()
	if code != 2 || out != "" || !strings.Contains(errOut, "Commands:") {
		t.Errorf("no args: exit %d, stdout %q", code, out)
	}
	code, _, errOut = runCmd("frobnicate")
	if code != 2 || !strings.Contains(errOut, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: exit %d, %q", code, errOut)
	}
	code, _, errOut = runCmd("--id", "1")
	if code != 2 || !strings.Contains(errOut, "unknown flag --id") {
		t.Errorf("flag before command: exit %d, %q", code, errOut)
	}
	code, out, _ = runCmd("help", "demo")
	if code != 0 || !strings.Contains(out, "--nodes") {
		t.Errorf("help demo: exit %d\n%s", code, out)
	}
	code, _, errOut = runCmd("help", "nope")
	if code != 2 || !strings.Contains(errOut, `unknown command "nope"`) {
		t.Errorf("help nope: exit %d, %q", code, errOut)
	}
}

// Every subcommand's --help, -h and `kvorum help CMD` print usage to stdout,
// exit 0, and describe every flag with its default.
func TestHelpMentionsEveryFlag(t *testing.T) {
	sets := map[string]*flag.FlagSet{
		"start":   newStartFlags().fs,
		"demo":    newDemoFlags().fs,
		"ctl":     newCtlFlags().fs,
		"version": newVersionFlags(),
		"import":  newImportFlags().fs,
	}
	for name, fs := range sets {
		for _, args := range [][]string{{name, "--help"}, {name, "-h"}, {"help", name}} {
			code, out, errOut := runCmd(args...)
			if code != 0 || errOut != "" {
				t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
			}
			if !strings.HasPrefix(out, "Usage:\n  kvorum "+name) {
				t.Errorf("%v: output does not start with usage:\n%s", args, out)
			}
			fs.VisitAll(func(f *flag.Flag) {
				i := strings.Index(out, "\n  --"+f.Name+" ")
				if i < 0 {
					i = strings.Index(out, "\n  --"+f.Name+"\n")
				}
				if i < 0 {
					t.Errorf("%v: no --%s in help", args, f.Name)
					return
				}
				// The flag's entry runs to the next flag or section.
				entry := out[i+1:]
				if j := strings.Index(entry[2:], "\n  --"); j >= 0 {
					entry = entry[:j+2]
				}
				if j := strings.Index(entry, "\n\n"); j >= 0 {
					entry = entry[:j]
				}
				if !strings.Contains(entry, "default") && !strings.Contains(entry, "required") {
					t.Errorf("%v: --%s has no default/required note: %q", args, f.Name, entry)
				}
				if f.DefValue != "" && f.DefValue != "0" && !strings.Contains(entry, "(default "+f.DefValue+")") {
					t.Errorf("%v: --%s entry lacks its default %q: %q", args, f.Name, f.DefValue, entry)
				}
			})
		}
	}
}

func TestHelpDefaultsMatchServer(t *testing.T) {
	_, out, _ := runCmd("start", "--help")
	for _, want := range []string{
		"(default " + server.DefaultClientAddr + ")",
		"(default " + server.DefaultPeerAddr + ")",
		"(default " + server.DefaultAdminAddr + ")",
		"(default 100ms)", "(default 10)", "(default 1)", "(default 10000)",
		"(default 512KiB)", "(default 64MiB)", "(default 1048576)", "(default 128MiB)",
		"(default 10s)", "(default warn)", "(default text)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("start --help lacks %q", want)
		}
	}
}

func TestBadFlags(t *testing.T) {
	cases := []struct {
		args []string
		msg  string
	}{
		{[]string{"start", "--bogus"}, "flag provided but not defined: --bogus"},
		{[]string{"start", "--data-dir"}, "flag needs an argument: --data-dir"},
		{[]string{"start", "--data-dir", "d", "--election-ticks", "x"}, `invalid value "x" for flag --election-ticks`},
		{[]string{"start", "--data-dir", "d", "extra"}, `unexpected argument "extra"`},
		{[]string{"demo", "--nodes", "0"}, "--nodes must be between 1 and 9"},
		{[]string{"demo", "--nodes", "10"}, "--nodes must be between 1 and 9"},
		{[]string{"demo", "--port", "0"}, "--port must be between 1 and"},
		{[]string{"demo", "--port", "63534"}, "--port must be between 1 and 63533"},
		{[]string{"demo", "--log-level", "loud"}, "--log-level"},
		{[]string{"ctl", "--bogus", "status"}, "--bogus"},
		{[]string{"ctl"}, "missing subcommand"},
		{[]string{"ctl", "dance"}, `unknown subcommand "dance"`},
		{[]string{"ctl", "member"}, "usage: kvorum ctl member"},
		{[]string{"ctl", "member", "frob"}, `unknown member subcommand "frob"`},
		{[]string{"ctl", "member", "add", "4"}, "usage: kvorum ctl member add ID PEERADDR"},
		{[]string{"ctl", "member", "add", "x", "h:1"}, `node id "x" is not a positive integer`},
		{[]string{"ctl", "member", "add", "4", "nohost"}, "peer address"},
		{[]string{"ctl", "member", "remove"}, "usage: kvorum ctl member remove ID"},
		{[]string{"ctl", "member", "remove", "0"}, "not a positive integer"},
		{[]string{"ctl", "transfer-leader"}, "usage: kvorum ctl transfer-leader ID"},
		{[]string{"ctl", "status", "extra"}, "usage: kvorum ctl status"},
		{[]string{"ctl", "--addr", "nope", "status"}, "--addr"},
		{[]string{"ctl", "--timeout", "0s", "status"}, "--timeout must be positive"},
		{[]string{"version", "extra"}, `unexpected argument "extra"`},
		{[]string{"version", "--x"}, "--x"},
	}
	for _, c := range cases {
		code, out, errOut := runCmd(c.args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", c.args, code, errOut)
			continue
		}
		if out != "" {
			t.Errorf("%v: wrote to stdout: %q", c.args, out)
		}
		if !strings.Contains(errOut, c.msg) || !strings.Contains(errOut, "--help' for usage") {
			t.Errorf("%v: stderr %q lacks %q", c.args, errOut, c.msg)
		}
	}
}

func TestParseInitialCluster(t *testing.T) {
	good := []struct {
		in   string
		want map[uint64]string
	}{
		{"", nil},
		{"1=127.0.0.1:7379", map[uint64]string{1: "127.0.0.1:7379"}},
		{"1=a:7379,2=b:7379,3=c:7379", map[uint64]string{1: "a:7379", 2: "b:7379", 3: "c:7379"}},
		{" 1 = a:1 , 2=b:2 ", map[uint64]string{1: "a:1", 2: "b:2"}},
		{"7=[::1]:7379", map[uint64]string{7: "[::1]:7379"}},
	}
	for _, g := range good {
		got, err := parseInitialCluster(g.in)
		if err != nil || !reflect.DeepEqual(got, g.want) {
			t.Errorf("parseInitialCluster(%q) = %v, %v; want %v", g.in, got, err, g.want)
		}
	}
	bad := []struct{ in, msg string }{
		{"1=a:1,", "entry 2 is empty"},
		{",1=a:1", "entry 1 is empty"},
		{"1=a:1,,2=b:2", "entry 2 is empty"},
		{"a:1", `entry "a:1": want ID=HOST:PORT`},
		{"x=a:1", `node id "x" is not a positive integer`},
		{"0=a:1", `node id "0" is not a positive integer`},
		{"-1=a:1", `node id "-1" is not a positive integer`},
		{"1=a", "not host:port"},
		{"1=", "empty"},
		{"1=:7379", "no host"},
		{"1=a:0", "invalid port"},
		{"1=a:70000", "invalid port"},
		{"1=a:http", "invalid port"},
		{"1=a:1,1=b:2", "node id 1 is listed twice"},
		{"1=a:1,2=a:1", "address a:1 is listed for both node 1 and node 2"},
	}
	for _, b := range bad {
		_, err := parseInitialCluster(b.in)
		if err == nil || !strings.Contains(err.Error(), b.msg) {
			t.Errorf("parseInitialCluster(%q) error = %v, want %q", b.in, err, b.msg)
		}
	}
}

func TestParseStart(t *testing.T) {
	f, err := parseStart([]string{
		"--id", "2", "--data-dir", "/d",
		"--initial-cluster", "1=h1:7379,2=h2:7379,3=h3:7379",
		"--client-addr", "0.0.0.0:6379", "--admin-addr", "-",
		"--tick-interval", "50ms", "--election-ticks", "20", "--heartbeat-ticks", "2",
		"--snapshot-threshold", "500", "--request-timeout", "3s", "--max-key-size", "1KiB", "--max-value-size", "2M",
		"--max-args", "100", "--max-frame-size", "4MiB", "--max-clients", "5", "--record-cache", "7",
		"--log-level", "debug", "--log-format", "json", "--sentinel-master-name", "kv-main",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := f.cfg
	want := server.Config{
		ID: 2, DataDir: "/d", ClientAddr: "0.0.0.0:6379", PeerAddr: "h2:7379", AdvertisePeerAddr: "h2:7379", AdminAddr: "-",
		InitialCluster: map[uint64]string{1: "h1:7379", 2: "h2:7379", 3: "h3:7379"},
		TickInterval:   50 * time.Millisecond, ElectionTicks: 20, HeartbeatTicks: 2, SnapshotThreshold: 500,
		RequestTimeout: 3 * time.Second,
		MaxKeySize:     1024, MaxValueSize: 2 << 20, MaxArgs: 100, MaxFrameSize: 4 << 20, MaxClients: 5,
		RecordCache: 7, ReadCache: server.DefaultReadCache,
		LeaseReads:         true, // --lease-reads defaults to true
		SentinelMasterName: "kv-main",
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("config\n got %+v\nwant %+v", c, want)
	}
	if f.logLevel != "debug" || f.logFormat != "json" {
		t.Errorf("log options %q %q", f.logLevel, f.logFormat)
	}

	// An explicit --peer-addr wins over the --initial-cluster entry.
	f, err = parseStart([]string{"--id", "1", "--data-dir", "/d", "--initial-cluster", "1=h1:7379", "--peer-addr", "0.0.0.0:7379"}, nil)
	if err != nil || f.cfg.PeerAddr != "0.0.0.0:7379" {
		t.Errorf("explicit peer addr: %v %q", err, f.cfg.PeerAddr)
	}

	// Restart: only --data-dir; everything else defaults.
	f, err = parseStart([]string{"--data-dir", "/d"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	def := server.Config{DataDir: "/d", LeaseReads: true}
	def.EnsureDefaults()
	def.FS, def.Logger, def.Now = nil, nil, nil // set by EnsureDefaults at start
	if !reflect.DeepEqual(f.cfg, def) {
		t.Errorf("restart config\n got %+v\nwant %+v", f.cfg, def)
	}
	if f, err := parseStart([]string{"--data-dir", "/d", "--lease-reads=false"}, nil); err != nil || f.cfg.LeaseReads {
		t.Errorf("--lease-reads=false: LeaseReads %v, %v", f.cfg.LeaseReads, err)
	}

	// Join.
	f, err = parseStart([]string{"--id", "4", "--data-dir", "/d", "--join", "h1:7379", "--peer-addr", "h4:7379"}, nil)
	if err != nil || f.cfg.Join != "h1:7379" || f.cfg.InitialCluster != nil {
		t.Errorf("join: %v %+v", err, f.cfg)
	}
}

func TestParseStartErrors(t *testing.T) {
	cases := []struct {
		args []string
		msg  string
	}{
		{[]string{}, "--data-dir is required"},
		{[]string{"--data-dir", "d", "--id", "0"}, "--id must be a positive integer"},
		{[]string{"--data-dir", "d", "--initial-cluster", "1=a:1"}, "--id is required with --initial-cluster"},
		{[]string{"--data-dir", "d", "--id", "4", "--initial-cluster", "1=a:1,2=b:1"}, "does not list this node's id 4 (it lists 1, 2)"},
		{[]string{"--data-dir", "d", "--id", "1", "--initial-cluster", "1=a:1,x"}, `--initial-cluster: entry "x"`},
		{[]string{"--data-dir", "d", "--id", "1", "--initial-cluster", "1=a:1", "--join", "b:1"}, "mutually exclusive"},
		{[]string{"--data-dir", "d", "--join", "b:1"}, "--id is required with --join"},
		{[]string{"--data-dir", "d", "--id", "1", "--join", "b"}, "--join"},
		{[]string{"--data-dir", "d", "--client-addr", "6379"}, "--client-addr"},
		{[]string{"--data-dir", "d", "--peer-addr", "h:99999"}, "--peer-addr"},
		{[]string{"--data-dir", "d", "--admin-addr", "x"}, "--admin-addr"},
		{[]string{"--data-dir", "d", "--tick-interval", "0s"}, "--tick-interval must be at least 1ms"},
		{[]string{"--data-dir", "d", "--heartbeat-ticks", "0"}, "--heartbeat-ticks must be at least 1"},
		{[]string{"--data-dir", "d", "--election-ticks", "3", "--heartbeat-ticks", "3"}, "--election-ticks (3) must be greater than --heartbeat-ticks (3)"},
		{[]string{"--data-dir", "d", "--snapshot-threshold", "0"}, "--snapshot-threshold must be positive"},
		{[]string{"--data-dir", "d", "--request-timeout", "0s"}, "--request-timeout must be positive"},
		{[]string{"--data-dir", "d", "--max-clients", "0"}, "--max-clients must be positive"},
		{[]string{"--data-dir", "d", "--max-key-size", "0"}, "--max-key-size must be positive"},
		{[]string{"--data-dir", "d", "--max-value-size", "1GiB"}, "must not exceed --max-frame-size"},
		{[]string{"--data-dir", "d", "--log-level", "chatty"}, `--log-level "chatty"`},
		{[]string{"--data-dir", "d", "--log-format", "xml"}, `--log-format "xml"`},
	}
	for _, c := range cases {
		_, err := parseStart(c.args, nil)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.msg)
		}
		if _, ok := err.(*usageError); err != nil && !ok {
			t.Errorf("%v: %T is not a usage error", c.args, err)
		}
	}
}

func TestSizes(t *testing.T) {
	for in, want := range map[string]int{
		"0": 0, "100": 100, "1K": 1024, "1kb": 1024, "2KiB": 2048, "3M": 3 << 20, "3 MiB": 3 << 20,
		"1G": 1 << 30, "10B": 10,
	} {
		got, err := parseSize(in)
		if err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "K", "-1", "1.5M", "1T", "x", "99999999999999999999"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) succeeded", in)
		}
	}
	for in, want := range map[int]string{0: "0", 100: "100", 1024: "1KiB", 1536: "1536", 64 << 20: "64MiB", 2 << 30: "2GiB"} {
		if got := formatSize(in); got != want {
			t.Errorf("formatSize(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestDemoConfigs(t *testing.T) {
	f, err := parseDemo([]string{"--nodes", "3", "--port", "16379"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfgs := demoNodeConfigs(f.nodes, f.port, "/tmp/x")
	if len(cfgs) != 3 {
		t.Fatalf("%d configs", len(cfgs))
	}
	c := cfgs[1]
	if c.ID != 2 || c.DataDir != "/tmp/x/node-2" || c.ClientAddr != "127.0.0.1:16380" ||
		c.PeerAddr != "127.0.0.1:17380" || c.AdminAddr != "127.0.0.1:18380" {
		t.Errorf("node 2 config %+v", c)
	}
	wantCluster := map[uint64]string{1: "127.0.0.1:17379", 2: "127.0.0.1:17380", 3: "127.0.0.1:17381"}
	if !reflect.DeepEqual(c.InitialCluster, wantCluster) {
		t.Errorf("cluster %v", c.InitialCluster)
	}
	for _, c := range cfgs {
		c.EnsureDefaults()
		if err := c.Validate(); err != nil {
			t.Errorf("node %d config invalid: %v", c.ID, err)
		}
	}
	// The highest allowed port keeps every admin port valid.
	f, err = parseDemo([]string{"--nodes", "9", "--port", fmt.Sprint(65535 - 2000 - 8)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	last := demoNodeConfigs(f.nodes, f.port, "d")[8]
	if last.AdminAddr != "127.0.0.1:65535" {
		t.Errorf("last admin addr %s", last.AdminAddr)
	}
}

func TestCheckDemoDir(t *testing.T) {
	dir := t.TempDir()
	if resumed, err := checkDemoDir(dir+"/missing", 3); err != nil || resumed {
		t.Errorf("missing dir: %v %v", resumed, err)
	}
	if resumed, err := checkDemoDir(dir, 3); err != nil || resumed {
		t.Errorf("empty dir: %v %v", resumed, err)
	}
	for i := 1; i <= 3; i++ {
		if err := mkdir(fmt.Sprintf("%s/node-%d", dir, i)); err != nil {
			t.Fatal(err)
		}
	}
	if resumed, err := checkDemoDir(dir, 3); err != nil || !resumed {
		t.Errorf("3-node dir: %v %v", resumed, err)
	}
	if _, err := checkDemoDir(dir, 5); err == nil || !strings.Contains(err.Error(), "holds a 3-node demo cluster; run with --nodes 3") {
		t.Errorf("size mismatch: %v", err)
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := runCmd("version")
	if code != 0 || !strings.HasPrefix(out, "kvorum "+version+"\n") || !strings.Contains(out, "go:") {
		t.Errorf("version: %d %q", code, out)
	}
	var b bytes.Buffer
	writeVersion(&b, buildInfo{Version: "1.2.3", GoVersion: "go1.99", Commit: "abcdef", Modified: true, Time: "2026-01-01T00:00:00Z", Platform: "linux/amd64"})
	want := "kvorum 1.2.3\ngo:       go1.99\ncommit:   abcdef (modified) 2026-01-01T00:00:00Z\nplatform: linux/amd64\n"
	if b.String() != want {
		t.Errorf("writeVersion:\n%s\nwant\n%s", b.String(), want)
	}
}

// fakeNode backs an httptest admin server for ctl tests.
type fakeNode struct {
	st      admin.Status
	addErr  error
	lastOp  string
	lastCtx bool
	ranges  []admin.Range
}

func (f *fakeNode) Status() admin.Status { return f.st }
func (f *fakeNode) AddMember(ctx context.Context, id uint64, addr string) error {
	f.lastOp = fmt.Sprintf("add %d %s", id, addr)
	if f.addErr != nil {
		return f.addErr
	}
	f.st.Members = append(f.st.Members, admin.Member{ID: id, PeerAddr: addr})
	return nil
}
func (f *fakeNode) RemoveMember(ctx context.Context, id uint64) error {
	f.lastOp = fmt.Sprintf("remove %d", id)
	var ms []admin.Member
	for _, m := range f.st.Members {
		if m.ID != id {
			ms = append(ms, m)
		}
	}
	f.st.Members = ms
	return nil
}
func (f *fakeNode) TransferLeader(ctx context.Context, id uint64) error {
	f.lastOp = fmt.Sprintf("transfer %d", id)
	f.st.Leader = id
	return nil
}

// httpErr is an error with its own HTTP status (admin.HTTPStatuser).
type httpErr struct {
	code int
	msg  string
}

func (e httpErr) Error() string   { return e.msg }
func (e httpErr) HTTPStatus() int { return e.code }

func (f *fakeNode) SplitRange(ctx context.Context, id uint64, sl uint16) (admin.SplitRangeResponse, error) {
	f.lastOp = fmt.Sprintf("split %d %d", id, sl)
	if id != 1 {
		return admin.SplitRangeResponse{}, httpErr{404, fmt.Sprintf("no range %d on node 1", id)}
	}
	if sl >= 8192 {
		return admin.SplitRangeResponse{}, fmt.Errorf("%w: slot %d, range 1 owns slots [0, 8192)", admin.ErrInvalid, sl)
	}
	return admin.SplitRangeResponse{
		Left:  admin.RangeDescriptor{RangeID: 1, StartSlot: 0, EndSlot: uint32(sl), Generation: 4},
		Right: admin.RangeDescriptor{RangeID: 7, StartSlot: uint32(sl), EndSlot: 8192, Generation: 4},
	}, nil
}

func (f *fakeNode) TransferRangeLeader(ctx context.Context, id, node uint64) (admin.TransferRangeLeaderResponse, error) {
	f.lastOp = fmt.Sprintf("transfer range %d %d", id, node)
	if id != 1 && id != 2 {
		return admin.TransferRangeLeaderResponse{}, httpErr{404, fmt.Sprintf("no range %d on node 1", id)}
	}
	if node > 3 {
		return admin.TransferRangeLeaderResponse{}, httpErr{400, fmt.Sprintf("node %d is not a replica of range %d and cannot lead it (its voters: 1, 2, 3)", node, id)}
	}
	return admin.TransferRangeLeaderResponse{RangeID: id, Leader: node, Term: 12}, nil
}

func (f *fakeNode) Ranges() admin.RangesResponse {
	return admin.RangesResponse{NodeID: f.st.NodeID, Ranges: f.ranges}
}

func newCtlServer(t *testing.T) (*fakeNode, string) {
	f := &fakeNode{st: admin.Status{
		NodeID: 1, ClusterID: 0x1234abcd, Role: "leader", Term: 7, Leader: 1,
		CommitIndex: 42, AppliedIndex: 42, FirstIndex: 5, LastIndex: 42,
		ClientAddr: "127.0.0.1:6379", PeerAddr: "127.0.0.1:7379", AdminAddr: "127.0.0.1:8379",
		Version: "0.1.0-dev", Ready: true, Ranges: 1, RangesLeading: 1,
		Members: []admin.Member{
			{ID: 1, PeerAddr: "127.0.0.1:7379", Match: 42, Replicas: 1, Leading: 1},
			{ID: 2, PeerAddr: "127.0.0.1:7380", Match: 42, Replicas: 1},
			{ID: 3, PeerAddr: "127.0.0.1:7381", Match: 40, Replicas: 1},
		},
	}}
	ts := httptest.NewServer(admin.New(admin.Config{Node: f}).Handler())
	t.Cleanup(ts.Close)
	return f, strings.TrimPrefix(ts.URL, "http://")
}

func TestCtlStatus(t *testing.T) {
	_, addr := newCtlServer(t)
	code, out, errOut := runCmd("ctl", "--addr", addr, "status")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := `node:          1
role:          leader
leader:        1 (this node)
term:          7
ready:         yes
cluster id:    000000001234abcd
commit index:  42
applied index: 42
log:           5..42 (first..last index)
client addr:   127.0.0.1:6379
peer addr:     127.0.0.1:7379
admin addr:    127.0.0.1:8379
version:       0.1.0-dev
members:       3 voter(s), 0 learner(s)
ranges:        1, 1 led by this node (kvorum ctl range list)

ID  PEER ADDR       ROLE    MATCH  RANGES  LEADING
1   127.0.0.1:7379  leader  42     1       1
2   127.0.0.1:7380  voter   42     1       0
3   127.0.0.1:7381  voter   40     1       0
`
	if out != want {
		t.Errorf("status output:\n%s\nwant:\n%s", out, want)
	}

	// --json after the subcommand prints the API's JSON.
	code, out, _ = runCmd("ctl", "status", "--addr", addr, "--json")
	if code != 0 || !strings.Contains(out, `"node_id": 1`) || !strings.Contains(out, `"cluster_id": 305441741`) {
		t.Errorf("status --json: %d\n%s", code, out)
	}
}

func TestCtlMembers(t *testing.T) {
	f, addr := newCtlServer(t)
	f.st.NodeID = 2 // a follower: no replication progress to show
	f.st.Members = append(f.st.Members, admin.Member{ID: 4, PeerAddr: "10.0.0.4:7379", Learner: true})
	code, out, _ := runCmd("ctl", "--addr", "http://"+addr, "member", "list")
	want := `ID  PEER ADDR       ROLE     MATCH  RANGES  LEADING
1   127.0.0.1:7379  leader   -      1       1
2   127.0.0.1:7380  voter    -      1       0
3   127.0.0.1:7381  voter    -      1       0
4   10.0.0.4:7379   learner  -      0       0
`
	if code != 0 || out != want {
		t.Errorf("member list: %d\n%s\nwant:\n%s", code, out, want)
	}

	f.st.NodeID = 1
	f.st.Members = f.st.Members[:3]
	code, out, errOut := runCmd("ctl", "--addr", addr, "member", "add", "5", "10.0.0.5:7379")
	if code != 0 || f.lastOp != "add 5 10.0.0.5:7379" || !strings.HasPrefix(out, "added node 5 (10.0.0.5:7379) as a voter\n\n") ||
		!strings.Contains(out, "5   10.0.0.5:7379   voter   0      0       0") || !strings.Contains(errOut, "waiting") {
		t.Errorf("member add: %d %q\n%s", code, f.lastOp, out)
	}

	code, out, _ = runCmd("ctl", "--addr", addr, "member", "remove", "5")
	if code != 0 || f.lastOp != "remove 5" || !strings.HasPrefix(out, "removed node 5\n") || strings.Contains(out, "10.0.0.5") {
		t.Errorf("member remove: %d %q\n%s", code, f.lastOp, out)
	}

	code, out, _ = runCmd("ctl", "--addr", addr, "--json", "member", "list")
	if code != 0 || !strings.Contains(out, `"members": [`) || !strings.Contains(out, `"leader": 1`) {
		t.Errorf("member list --json: %d\n%s", code, out)
	}

	code, out, _ = runCmd("ctl", "--addr", addr, "transfer-leader", "3")
	if code != 0 || f.lastOp != "transfer 3" || out != "node 3 is now the leader\n" {
		t.Errorf("transfer-leader: %d %q %q", code, f.lastOp, out)
	}
}

func TestCtlRanges(t *testing.T) {
	f, addr := newCtlServer(t)
	code, out, _ := runCmd("ctl", "--addr", addr, "range", "list")
	if code != 0 || out != "no ranges\n" {
		t.Errorf("range list, none: %d %q", code, out)
	}
	f.ranges = []admin.Range{
		{RangeID: 1, StartSlot: 0, EndSlot: 8192, Generation: 3, Role: "leader", Leader: 1, Term: 7, AppliedIndex: 42, ApproximateBytes: 3 << 20,
			ReadsTotal: 90000, WritesTotal: 70, ReadsPerSec: 1234.56, WritesPerSec: 7.04,
			Replicas: []admin.Member{{ID: 1}, {ID: 2}, {ID: 3}, {ID: 4, Learner: true}}},
		{RangeID: 2, StartSlot: 8192, EndSlot: 16384, Generation: 1, Role: "follower", Term: 2, AppliedIndex: 10, ApproximateBytes: 512,
			Replicas: []admin.Member{{ID: 2}, {ID: 3}}},
	}
	code, out, _ = runCmd("ctl", "--addr", addr, "ranges", "ls")
	want := `RANGE  SLOTS       GEN  ROLE      LEADER  TERM  APPLIED  REPLICAS     SIZE     READS/S  WRITES/S
1      0-8191      3    leader    1       7     42       1*,2,3,4(l)  3.0 MiB  1235     7.0
2      8192-16383  1    follower  -       2     10       2,3          512 B    0.0      0.0
`
	if code != 0 || out != want {
		t.Errorf("range list: %d\n%s\nwant:\n%s", code, out, want)
	}
	code, out, _ = runCmd("ctl", "--addr", addr, "--json", "range", "list")
	if code != 0 || !strings.Contains(out, `"range_id": 2`) || !strings.Contains(out, `"approximate_bytes": 3145728`) ||
		!strings.Contains(out, `"reads_per_sec": 1234.56`) || !strings.Contains(out, `"writes_per_sec": 7.04`) ||
		!strings.Contains(out, `"reads_total": 90000`) || !strings.Contains(out, `"writes_total": 70`) {
		t.Errorf("range list --json: %d\n%s", code, out)
	}
	code, _, errOut := runCmd("ctl", "--addr", addr, "range", "split")
	if code != 2 || !strings.Contains(errOut, "usage: kvorum ctl range split RANGE SLOT") {
		t.Errorf("range split: %d %q", code, errOut)
	}
	code, _, errOut = runCmd("ctl", "--addr", addr, "range", "merge")
	if code != 2 || !strings.Contains(errOut, `unknown range subcommand "merge"`) {
		t.Errorf("range merge: %d %q", code, errOut)
	}
	for _, bad := range [][]string{{"x", "100"}, {"1", "abc"}, {"1", "0"}, {"1", "16384"}, {"0", "5"}} {
		code, _, errOut = runCmd("ctl", "--addr", addr, "range", "split", bad[0], bad[1])
		if code != 2 || !strings.Contains(errOut, "is not a") {
			t.Errorf("range split %v: %d %q", bad, code, errOut)
		}
	}
	code, out, _ = runCmd("ctl", "--addr", addr, "range", "split", "1", "4096")
	if code != 0 || f.lastOp != "split 1 4096" || out != "split range 1 at slot 4096\nrange 1: slots 0-4095, generation 4\nrange 7: slots 4096-8191, generation 4\n" {
		t.Errorf("range split: %d %q %q", code, f.lastOp, out)
	}
	code, out, _ = runCmd("ctl", "--addr", addr, "--json", "range", "split", "1", "100")
	if code != 0 || !strings.Contains(out, `"right": {`) || !strings.Contains(out, `"start_slot": 100`) {
		t.Errorf("range split --json: %d %q", code, out)
	}
	code, out, errOut = runCmd("ctl", "--addr", addr, "range", "split", "9", "100")
	if code != 1 || out != "" || !strings.Contains(errOut, "no range 9") || !strings.Contains(errOut, "HTTP 404") {
		t.Errorf("range split unknown: %d %q %q", code, out, errOut)
	}
	code, _, errOut = runCmd("ctl", "--addr", addr, "range", "split", "1", "9000")
	if code != 1 || !strings.Contains(errOut, "owns slots") || !strings.Contains(errOut, "HTTP 400") {
		t.Errorf("range split outside: %d %q", code, errOut)
	}
	code, _, errOut = runCmd("ctl", "--addr", addr, "range")
	if code != 2 || !strings.Contains(errOut, "usage: kvorum ctl range list") || !strings.Contains(errOut, "range transfer-leader RANGE NODE") {
		t.Errorf("range: %d %q", code, errOut)
	}
}

// TestCtlRangeTransferLeader: `kvorum ctl range transfer-leader RANGE
// NODE` checks its arguments, posts {"node": NODE} to
// /v1/ranges/RANGE/transfer-leader and prints the new leader (--json: the
// admin API's answer); the node's refusals keep their status.
func TestCtlRangeTransferLeader(t *testing.T) {
	f, addr := newCtlServer(t)
	for _, args := range [][]string{{}, {"2"}, {"2", "3", "4"}} {
		code, _, errOut := runCmd(append([]string{"ctl", "--addr", addr, "range", "transfer-leader"}, args...)...)
		if code != 2 || !strings.Contains(errOut, "usage: kvorum ctl range transfer-leader RANGE NODE") {
			t.Errorf("range transfer-leader %v: %d %q", args, code, errOut)
		}
	}
	for _, bad := range []struct{ rg, node, msg string }{
		{"x", "3", `range id "x" is not a positive integer`},
		{"0", "3", `range id "0" is not a positive integer`},
		{"2", "0", `node id "0" is not a positive integer`},
		{"2", "n3", `node id "n3" is not a positive integer`},
	} {
		code, _, errOut := runCmd("ctl", "--addr", addr, "range", "transfer-leader", bad.rg, bad.node)
		if code != 2 || !strings.Contains(errOut, bad.msg) {
			t.Errorf("range transfer-leader %s %s: %d %q", bad.rg, bad.node, code, errOut)
		}
	}
	if f.lastOp != "" {
		t.Fatalf("a bad command line reached the node: %q", f.lastOp)
	}
	code, out, _ := runCmd("ctl", "--addr", addr, "range", "transfer-leader", "2", "3")
	if code != 0 || f.lastOp != "transfer range 2 3" || out != "node 3 is now the leader of range 2 (term 12)\n" {
		t.Errorf("range transfer-leader: %d %q %q", code, f.lastOp, out)
	}
	code, out, _ = runCmd("ctl", "--addr", addr, "range", "transfer-leader", "--json", "1", "2")
	var res admin.TransferRangeLeaderResponse
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res != (admin.TransferRangeLeaderResponse{RangeID: 1, Leader: 2, Term: 12}) {
		t.Errorf("range transfer-leader --json: %d %q", code, out)
	}
	code, out, errOut := runCmd("ctl", "--addr", addr, "range", "transfer-leader", "9", "2")
	if code != 1 || out != "" || !strings.Contains(errOut, "no range 9") || !strings.Contains(errOut, "HTTP 404") {
		t.Errorf("range transfer-leader unknown range: %d %q %q", code, out, errOut)
	}
	code, _, errOut = runCmd("ctl", "--addr", addr, "range", "transfer-leader", "2", "7")
	if code != 1 || !strings.Contains(errOut, "node 7 is not a replica of range 2") || !strings.Contains(errOut, "HTTP 400") {
		t.Errorf("range transfer-leader not a voter: %d %q", code, errOut)
	}
}

func TestCtlErrors(t *testing.T) {
	f, addr := newCtlServer(t)

	code, out, errOut := runCmd("ctl", "--addr", addr, "member", "remove", "9")
	if code != 1 || out != "" || errOut != "kvorum ctl: node 9 is not a member (HTTP 404)\n" {
		t.Errorf("remove unknown: %d %q %q", code, out, errOut)
	}

	f.addErr = fmt.Errorf("%w: ask node 2", admin.ErrNotLeader)
	f.st.Leader = 2
	code, _, errOut = runCmd("ctl", "--addr", addr, "member", "add", "5", "h:5")
	if code != 1 || !strings.Contains(errOut, "not the leader") || !strings.Contains(errOut, "node 2 is the leader") || !strings.Contains(errOut, "HTTP 421") {
		t.Errorf("not leader: %d %q", code, errOut)
	}

	// Nothing listening.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	code, out, errOut = runCmd("ctl", "--addr", dead, "status")
	if code != 1 || out != "" || !strings.HasPrefix(errOut, "kvorum ctl: cannot reach kvorum admin at "+dead+": ") {
		t.Errorf("unreachable: %d %q", code, errOut)
	}

	// Something that is not a kvorum admin server.
	ts := httptest.NewServer(nil) // 404 for everything, text/plain
	defer ts.Close()
	code, _, errOut = runCmd("ctl", "--addr", strings.TrimPrefix(ts.URL, "http://"), "status")
	if code != 1 || !strings.Contains(errOut, "is it a kvorum admin address?") {
		t.Errorf("not kvorum: %d %q", code, errOut)
	}
}

func TestAdminURL(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:8379":        "http://127.0.0.1:8379",
		":8379":                 "http://127.0.0.1:8379",
		"[::1]:8379":            "http://[::1]:8379",
		"http://h:1/":           "http://h:1",
		"https://admin.example": "https://admin.example",
	} {
		if got, err := adminURL(in, false); err != nil || got != want {
			t.Errorf("adminURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "h", "h:0", "h:x", "http://"} {
		if _, err := adminURL(in, false); err == nil {
			t.Errorf("adminURL(%q) succeeded", in)
		}
	}
}

func mkdir(p string) error { return os.MkdirAll(p, 0o755) }

func TestCtlHealth(t *testing.T) {
	f, addr := newCtlServer(t)
	code, out, errOut := runCmd("ctl", "--addr", addr, "health")
	if code != 0 || out != "ready ("+addr+")\n" || errOut != "" {
		t.Errorf("ready node: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	f.st.Ready, f.st.Leader = false, 0
	code, out, errOut = runCmd("ctl", "health", "--addr", addr)
	if code != 1 || out != "" || !strings.Contains(errOut, "not ready: no leader known") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("node without a leader: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	// Unreachable: exit 1, one line, quickly.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	code, _, errOut = runCmd("ctl", "--addr", dead, "health")
	if code != 1 || !strings.Contains(errOut, "not ready: cannot reach kvorum admin at "+dead) || strings.Count(errOut, "\n") != 1 {
		t.Errorf("unreachable node: exit %d, stderr %q", code, errOut)
	}

	// Something else on the port: exit 1.
	ts := httptest.NewServer(nil)
	t.Cleanup(ts.Close)
	code, _, errOut = runCmd("ctl", "--addr", ts.URL, "health")
	if code != 1 || !strings.Contains(errOut, "HTTP 404") {
		t.Errorf("not an admin server: exit %d, stderr %q", code, errOut)
	}

	code, _, errOut = runCmd("ctl", "health", "extra")
	if code != 2 || !strings.Contains(errOut, "usage: kvorum ctl health") {
		t.Errorf("extra argument: exit %d, stderr %q", code, errOut)
	}
}
