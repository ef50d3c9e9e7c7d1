package main

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/chaos"
)

func TestChaosHelp(t *testing.T) {
	fs := newChaosFlags().fs
	for _, args := range [][]string{{"chaos", "--help"}, {"chaos", "-h"}, {"help", "chaos"}} {
		code, out, errOut := runCmd(args...)
		if code != 0 || errOut != "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
		if !strings.HasPrefix(out, "Usage:\n  kvorum chaos") {
			t.Errorf("%v: output does not start with usage:\n%s", args, out)
		}
		for _, want := range []string{"docker not implemented", "Exit status", "--seed", "netns", "proxy"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: help lacks %q", args, want)
			}
		}
	}
	_, out, _ := runCmd("chaos", "--help")
	checkFlagHelp(t, fs, out, "chaos")
}

// checkFlagHelp checks that help (a subcommand's --help output) describes
// every flag of fs with its default, and that the top-level help lists
// the subcommand.
func checkFlagHelp(t *testing.T, fs *flag.FlagSet, help, subcommand string) {
	t.Helper()
	fs.VisitAll(func(f *flag.Flag) {
		i := strings.Index(help, "\n  --"+f.Name+" ")
		if i < 0 {
			i = strings.Index(help, "\n  --"+f.Name+"\n")
		}
		if i < 0 {
			t.Errorf("no --%s in help", f.Name)
			return
		}
		entry := help[i+1:]
		if j := strings.Index(entry[2:], "\n  --"); j >= 0 {
			entry = entry[:j+2]
		}
		if !strings.Contains(entry, "default") {
			t.Errorf("--%s has no default note: %q", f.Name, entry)
		}
	})
	_, top, _ := runCmd("help")
	if !strings.Contains(top, "  "+subcommand+" ") {
		t.Errorf("top-level help lacks %s:\n%s", subcommand, top)
	}
}

func TestChaosBadFlags(t *testing.T) {
	dirWithNode := t.TempDir()
	if err := os.Mkdir(filepath.Join(dirWithNode, "node-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		msg  string
	}{
		{[]string{"--bogus"}, "flag provided but not defined: --bogus"},
		{[]string{"--nodes", "4"}, "--nodes must be 3 or 5 (got 4)"},
		{[]string{"--nodes", "x"}, `invalid value "x" for flag --nodes`},
		{[]string{"--duration", "0s"}, "--duration must be positive"},
		{[]string{"--faults", "kill,reboot"}, `--faults: unknown fault kind "reboot"`},
		{[]string{"--faults", ""}, "--faults: no fault kinds"},
		{[]string{"--interval", "5s-2s"}, "want MIN-MAX with 0 <= MIN <= MAX"},
		{[]string{"--interval", "soon"}, "want a duration such as 3s"},
		{[]string{"--clients", "0"}, "--clients must be between 1 and 256"},
		{[]string{"--network", "docker"}, "--network docker is not implemented"},
		{[]string{"--network", "tcp"}, `--network must be auto, netns or proxy (got "tcp")`},
		{[]string{"--subnet", "10.0.0.0/16"}, "want an IPv4 /24"},
		{[]string{"--network", "proxy", "--subnet", "10.9.9.0/24"}, "--subnet applies to --network netns only"},
		{[]string{"--election-ticks", "1"}, "--election-ticks (1) must be greater than --heartbeat-ticks (1)"},
		{[]string{"--election-timeout", "1s", "--election-ticks", "20"}, "not both"},
		{[]string{"--election-timeout", "10ms"}, "--election-timeout (10ms) must be at least one --tick-interval"},
		{[]string{"--binary", "/nonexistent/kvorum"}, "--binary /nonexistent/kvorum is not an executable file"},
		{[]string{"--data-dir", dirWithNode}, "already holds node data"},
		{[]string{"--recovery-timeout", "0s"}, "--recovery-timeout must be positive"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	}
	for _, c := range cases {
		checkUsageError(t, "chaos", c.args, c.msg)
	}
}

// checkUsageError runs `kvorum sub args...` and checks that it is refused
// as a usage error: exit 2, nothing on stdout, and msg plus the pointer to
// --help on stderr.
func checkUsageError(t *testing.T, sub string, args []string, msg string) {
	t.Helper()
	code, out, errOut := runCmd(append([]string{sub}, args...)...)
	if code != 2 {
		t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, errOut)
		return
	}
	if out != "" {
		t.Errorf("%v: wrote to stdout: %q", args, out)
	}
	if !strings.Contains(errOut, msg) || !strings.Contains(errOut, "kvorum "+sub+" --help' for usage") {
		t.Errorf("%v: stderr %q lacks %q", args, errOut, msg)
	}
}

func TestParseChaos(t *testing.T) {
	f, err := parseChaos(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := f.cfg
	if c.Nodes != 3 || c.Duration != 30*time.Second || c.Network != chaos.ModeAuto || c.Clients != 4 ||
		len(c.Kinds) != len(chaos.AllKinds) || c.IntervalMin != 2*time.Second || c.IntervalMax != 4*time.Second ||
		c.TickInterval != 50*time.Millisecond || c.ElectionTicks != 10 || c.Binary == "" || f.json {
		t.Errorf("defaults: %+v", c)
	}
	if c.Seed == 0 {
		t.Error("no seed drawn when --seed is not given")
	}
	f, err = parseChaos([]string{"--seed", "0", "--interval", "3s", "--faults", "pause,partition", "--nodes", "5",
		"--election-timeout", "1s", "--tick-interval", "100ms", "--network", "netns", "--subnet", "10.213.9.0/24", "--json"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c = f.cfg
	if c.Seed != 0 || c.IntervalMin != 3*time.Second || c.IntervalMax != 3*time.Second || c.Nodes != 5 ||
		c.ElectionTicks != 10 || len(c.Kinds) != 2 || c.Kinds[0] != chaos.KindPause || c.Subnet != "10.213.9.0/24" || !f.json {
		t.Errorf("parsed: %+v", c)
	}
}

// chaosVerdict is the part of `kvorum chaos --json` the test checks.
type chaosVerdict struct {
	Result        string         `json:"result"`
	Violations    []string       `json:"violations"`
	Mode          string         `json:"mode"`
	ModeReason    string         `json:"mode_reason"`
	Seed          int64          `json:"seed"`
	FaultsTotal   int            `json:"faults_total"`
	Faults        map[string]int `json:"faults"`
	Linearizable  string         `json:"linearizable"`
	Lost          int            `json:"lost_writes"`
	AckedDurable  int            `json:"acked_durable_keys"`
	Converged     bool           `json:"replicas_converged"`
	LongestGap    float64        `json:"longest_unavailability_s"`
	BankTransfers int            `json:"bank_transfers"`
	BankAudits    int            `json:"bank_audits"`
	Ops           struct {
		Invoked  int `json:"invoked"`
		Ok       int `json:"ok"`
		Failed   int `json:"failed"`
		Unknown  int `json:"unknown"`
		OkWrites int `json:"ok_writes"`
	} `json:"operations"`
}

// The built binary runs `kvorum chaos` for 8s in proxy mode and, as root,
// in netns mode: both must pass with faults injected, operations done,
// nothing lost and a linearizable history.
func TestChaosCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real clusters for ~30s")
	}
	bin := buildBinary(t)
	modes := []string{chaos.ModeProxy}
	if os.Geteuid() == 0 {
		if _, err := exec.LookPath("ip"); err == nil {
			modes = append(modes, chaos.ModeNetns)
		} else {
			t.Logf("running as root but the ip command is missing: netns mode not tested")
		}
	} else {
		t.Logf("not running as root (euid %d): netns mode needs root, testing proxy mode only", os.Geteuid())
	}
	// Seeds whose first faults are, in 8s: kill -9 of the leader, a clean
	// restart and a pause (19); isolating the leader, a restart and a
	// kill (31).
	seeds := map[string]string{chaos.ModeProxy: "19", chaos.ModeNetns: "31"}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			outDir := t.TempDir()
			var v chaosVerdict
			cmd, _ := runJSON(t, bin, nil, &v, "chaos", "--duration", "8s", "--nodes", "3", "--network", mode, "--interval", "1s-2s",
				"--seed", seeds[mode], "--json", "--out", outDir)
			t.Logf("verdict: %s mode=%s faults=%d %v ops invoked=%d ok=%d failed=%d unknown=%d ok_writes=%d linearizable=%s lost=%d (of %d) longest gap %.2fs",
				v.Result, v.Mode, v.FaultsTotal, v.Faults, v.Ops.Invoked, v.Ops.Ok, v.Ops.Failed, v.Ops.Unknown, v.Ops.OkWrites,
				v.Linearizable, v.Lost, v.AckedDurable, v.LongestGap)
			if v.Result != "PASS" || len(v.Violations) > 0 {
				t.Errorf("result %s, violations %v", v.Result, v.Violations)
			}
			if v.Mode != mode {
				t.Errorf("ran in mode %q (%s), want %q", v.Mode, v.ModeReason, mode)
			}
			if v.BankTransfers == 0 || v.BankAudits == 0 {
				t.Errorf("bank transfers %d, audits %d: want both > 0", v.BankTransfers, v.BankAudits)
			}
			if v.FaultsTotal == 0 || v.Ops.Invoked == 0 || v.Ops.OkWrites == 0 || v.AckedDurable == 0 {
				t.Errorf("faults %d, operations %d, ok writes %d, acknowledged durable keys %d: want all > 0",
					v.FaultsTotal, v.Ops.Invoked, v.Ops.OkWrites, v.AckedDurable)
			}
			if v.Lost != 0 || v.Linearizable != "yes" || !v.Converged {
				t.Errorf("lost %d, linearizable %q, converged %v", v.Lost, v.Linearizable, v.Converged)
			}
			if _, err := os.Stat(filepath.Join(outDir, "chaos-seed-"+seeds[mode]+".verdict.json")); err != nil {
				t.Errorf("verdict file: %v", err)
			}
			if mode == chaos.ModeNetns {
				out, _ := exec.Command("ip", "netns", "list").Output()
				if strings.Contains(string(out), "kvc"+strconv.FormatInt(int64(cmd.Process.Pid), 16)+"-") {
					t.Errorf("namespaces left behind:\n%s", out)
				}
			}
		})
	}
}
