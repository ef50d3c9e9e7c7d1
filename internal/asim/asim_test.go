package asim

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/kvorum/kvorum/internal/placement"
)

// TestDataDriven runs the scenarios in testdata/*.txt. After an intended
// change, regenerate the expected output with
//
//	go test ./internal/asim -rewrite
//
// and review the diff of testdata/ like code.
//
// Commands:
//
//	gen_cluster nodes=100 [capacity=1TiB] [rate=32MiB] [snapshots=2]
//	    a new cluster of live, empty nodes n1..nN; rate is the bytes per
//	    second a node sends or receives, snapshots its concurrent snapshots.
//	gen_ranges ranges=10000 [replicas=3] [bytes=64MiB] [placement=even|skewed] [seed=1]
//	    ranges of bytes ±50 %, led by their first replica (see Placement).
//	add_node [n=1]              n live, empty nodes.
//	kill_node id=7              the node dies now.
//	set_node id=3 speed=2 [key=value ...]
//	                            sets attributes of a node (placement.Node.Attrs).
//	eval duration=30m seed=42 [tick=10s] [dead_timeout=5m] [weight=speed] [by=replicas|bytes]
//	    runs the simulation (placement every tick) and prints what it did.
//	    weight: the attribute that weighs nodes (absent: 1) for placement
//	    and the later assertions (until another eval says otherwise); by:
//	    what replicas are balanced by.
//	assertion type=balance stat=replicas|leaders threshold=1.2
//	    ok, or the live nodes not within threshold× of their fair share.
//	assertion type=under_replicated
//	    ok, or the ranges with fewer live replicas than the factor.
//	print stat=replicas|leaders|bytes [format=table|histogram]
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var s *Sim
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "gen_cluster" && s == nil {
				d.Fatalf(t, "%s before gen_cluster", d.Cmd)
			}
			switch d.Cmd {
			case "gen_cluster":
				var cfg Config
				cfg.Capacity = bytesArg(t, d, "capacity", 0)
				cfg.SnapshotRate = bytesArg(t, d, "rate", 0)
				cfg.MaxSnapshotsPerNode = intArg(t, d, "snapshots", 0)
				s = New(intArg(t, d, "nodes", -1), cfg)
				s.Verify = true
				return fmt.Sprintf("%d nodes, capacity %s, snapshots at %s/s, %d at once per node\n",
					len(s.nodes), FormatBytes(s.cfg.Capacity), FormatBytes(s.cfg.SnapshotRate), s.cfg.MaxSnapshotsPerNode)
			case "gen_ranges":
				how := Placement(strArg(t, d, "placement", string(Even)))
				err := s.GenRanges(intArg(t, d, "ranges", -1), intArg(t, d, "replicas", 3),
					bytesArg(t, d, "bytes", 64<<20), how, int64(intArg(t, d, "seed", 1)))
				if err != nil {
					return fmt.Sprintf("error: %v\n", err)
				}
				return fmt.Sprintf("%d ranges, %d replicas each, placed %s\n%s", len(s.ranges), s.rf, how, s.counts())
			case "add_node":
				ids := s.AddNodes(intArg(t, d, "n", 1))
				if len(ids) == 1 {
					return fmt.Sprintf("added n%d at %s\n", ids[0], s.now)
				}
				return fmt.Sprintf("added n%d..n%d at %s\n", ids[0], ids[len(ids)-1], s.now)
			case "kill_node":
				id := placement.NodeID(intArg(t, d, "id", -1))
				if err := s.KillNode(id); err != nil {
					return fmt.Sprintf("error: %v\n", err)
				}
				nd := s.node(id)
				return fmt.Sprintf("n%d dead at %s: it held %d replicas and led %d ranges\n", id, s.now, nd.replicas, nd.leaders)
			case "set_node":
				id := placement.NodeID(intArg(t, d, "id", -1))
				var set []string
				for _, a := range d.CmdArgs {
					if a.Key == "id" {
						continue
					}
					v, err := strconv.ParseFloat(strArg(t, d, a.Key, ""), 64)
					if err != nil {
						d.Fatalf(t, "%s: %v", a.Key, err)
					}
					if err := s.SetAttr(id, a.Key, v); err != nil {
						return fmt.Sprintf("error: %v\n", err)
					}
					set = append(set, fmt.Sprintf("%s=%g", a.Key, v))
				}
				return fmt.Sprintf("n%d: %s\n", id, strings.Join(set, " "))
			case "eval":
				s.Weight = strArg(t, d, "weight", "-")
				if s.Weight == "-" {
					s.Weight = ""
				}
				switch by := strArg(t, d, "by", "replicas"); by {
				case "replicas":
					s.By = placement.StatReplicas
				case "bytes":
					s.By = placement.StatBytes
				default:
					d.Fatalf(t, "by=%s: replicas or bytes", by)
				}
				res := s.Eval(durArg(t, d, "duration", -1), durArg(t, d, "tick", 10*time.Second),
					durArg(t, d, "dead_timeout", 5*time.Minute), int64(intArg(t, d, "seed", -1)))
				return s.report(res)
			case "assertion":
				var bad []string
				switch typ := strArg(t, d, "type", ""); typ {
				case "balance":
					thr, err := strconv.ParseFloat(strArg(t, d, "threshold", "1.2"), 64)
					if err != nil {
						d.Fatalf(t, "threshold: %v", err)
					}
					bad = s.Imbalanced(Stat(strArg(t, d, "stat", "replicas")), thr)
				case "under_replicated":
					for _, id := range s.UnderReplicated() {
						bad = append(bad, fmt.Sprintf("r%d", id))
					}
				default:
					d.Fatalf(t, "unknown assertion type %q", typ)
				}
				if len(bad) == 0 {
					return "ok\n"
				}
				more, n := "", len(bad)
				if len(bad) > 10 {
					more = fmt.Sprintf("\n... and %d more", len(bad)-10)
					bad = bad[:10]
				}
				return fmt.Sprintf("failed: %d\n%s%s\n", n, strings.Join(bad, "\n"), more)
			case "print":
				st := Stat(strArg(t, d, "stat", "replicas"))
				if strArg(t, d, "format", "table") == "histogram" {
					return s.Histogram(st)
				}
				return s.Table(st)
			default:
				d.Fatalf(t, "unknown command %q", d.Cmd)
			}
			return ""
		})
	})
}

// counts is the one-line summary of replicas and leaders per live node.
func (s *Sim) counts() string {
	var b strings.Builder
	for _, st := range []Stat{StatReplicas, StatLeaders} {
		sm := s.Summarize(st)
		ratio := 0.0
		if sm.Mean > 0 {
			ratio = sm.Max / sm.Mean
		}
		fmt.Fprintf(&b, "%s per live node: min %.0f mean %.1f max %.0f (max/mean %.2f)\n", st, sm.Min, sm.Mean, sm.Max, ratio)
	}
	return b.String()
}

func (s *Sim) report(res *Result) string {
	var b strings.Builder
	if res.Err != nil {
		fmt.Fprintf(&b, "invariant violated: %v\n", res.Err)
	}
	fmt.Fprintf(&b, "eval %s to %s (seed %d, tick %s, dead-node timeout %s): %d plans\n",
		res.Start, res.End, res.Seed, res.Tick, res.Timeout, res.Plans)
	fmt.Fprintf(&b, "moves: %d (%d rebalance, %d dead-node, %d under-replicated), %d failed, %s sent\n",
		res.TotalMoves(), res.Moves[placement.ReasonRebalance], res.Moves[placement.ReasonDeadNode],
		res.Moves[placement.ReasonUnderReplicated], res.Failed, FormatBytes(res.BytesMoved))
	fmt.Fprintf(&b, "removals: %d, leader transfers: %d, elections: %d\n", res.Removals, res.Transfers, res.Elections)
	r := func(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }
	switch {
	case res.LastChange < 0 && res.Converged:
		b.WriteString("converged: nothing to do\n")
	case res.Converged:
		fmt.Fprintf(&b, "converged at %s (%s after the start)\n", r(res.LastChange), r(res.LastChange-res.Start))
	default:
		last := "no change yet"
		if res.LastChange >= 0 {
			last = "last change at " + r(res.LastChange).String()
		}
		fmt.Fprintf(&b, "not converged: %d moves in flight, %d ranges under-replicated, %s\n",
			res.InFlight, res.UnderReplicated, last)
	}
	b.WriteString(s.counts())
	fmt.Fprintf(&b, "under-replicated ranges: %d, unavailable: %d\n", res.UnderReplicated, len(s.Unavailable()))
	return b.String()
}

func strArg(t *testing.T, d *datadriven.TestData, key, def string) string {
	for _, a := range d.CmdArgs {
		if a.Key == key {
			if len(a.Vals) != 1 {
				d.Fatalf(t, "%s: one value expected", key)
			}
			return a.Vals[0]
		}
	}
	if def == "" {
		d.Fatalf(t, "%s: missing", key)
	}
	return def
}

// intArg, durArg: a negative default means the argument is required.
func intArg(t *testing.T, d *datadriven.TestData, key string, def int) int {
	v := strArg(t, d, key, "-")
	if v == "-" {
		if def < 0 {
			d.Fatalf(t, "%s: missing", key)
		}
		return def
	}
	n, err := strconv.Atoi(strings.ReplaceAll(v, "_", ""))
	if err != nil {
		d.Fatalf(t, "%s: %v", key, err)
	}
	return n
}

func durArg(t *testing.T, d *datadriven.TestData, key string, def time.Duration) time.Duration {
	v := strArg(t, d, key, "-")
	if v == "-" {
		if def < 0 {
			d.Fatalf(t, "%s: missing", key)
		}
		return def
	}
	x, err := time.ParseDuration(v)
	if err != nil {
		d.Fatalf(t, "%s: %v", key, err)
	}
	return x
}

// bytesArg reads sizes such as 512KiB, 64MiB, 1TiB (or plain bytes).
func bytesArg(t *testing.T, d *datadriven.TestData, key string, def int64) int64 {
	v := strArg(t, d, key, "-")
	if v == "-" {
		return def
	}
	n, err := ParseBytes(v)
	if err != nil {
		d.Fatalf(t, "%s: %v", key, err)
	}
	return n
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"1": 1, "2KiB": 2048, "64MiB": 64 << 20, "1TiB": 1 << 40, "1.5GiB": 3 << 29} {
		got, err := ParseBytes(in)
		if err != nil || got != want {
			t.Errorf("%s: %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := ParseBytes("12XB"); err == nil {
		t.Error("12XB parsed")
	}
}
