package asim

import (
	"reflect"
	"testing"
	"time"
)

// TestCheckCatches: Check reports a corrupted model (the invariants the
// datadriven runs verify after every plan can fail).
func TestCheckCatches(t *testing.T) {
	fresh := func() *Sim {
		s := New(6, Config{})
		if err := s.GenRanges(30, 3, 1<<20, Even, 1); err != nil {
			t.Fatal(err)
		}
		if err := s.Check(); err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := fresh()
	s.ranges[0].replicas[1] = s.ranges[0].replicas[0]
	if s.Check() == nil {
		t.Error("two replicas on one node not caught")
	}
	s = fresh()
	s.nodes[2].leaders++
	if s.Check() == nil {
		t.Error("a wrong leader count not caught")
	}
	s = fresh()
	s.ranges[3].leader = 99
	if s.Check() == nil {
		t.Error("a leader that is no replica not caught")
	}
}

// TestSeeds: the same seeds give the same run; another eval seed changes
// the snapshots' durations, not the outcome's balance.
func TestSeeds(t *testing.T) {
	run := func(seed int64) (*Result, string) {
		s := New(20, Config{})
		s.Verify = true
		if err := s.GenRanges(1000, 3, 64<<20, Skewed, 1); err != nil {
			t.Fatal(err)
		}
		res := s.Eval(30*time.Minute, 10*time.Second, 5*time.Minute, seed)
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		return res, s.Table(StatReplicas) + s.Table(StatLeaders)
	}
	a, ta := run(1)
	b, tb := run(1)
	if !reflect.DeepEqual(a, b) || ta != tb {
		t.Fatalf("same seed, different runs:\n%+v\n%+v", a, b)
	}
	c, _ := run(2)
	if c.LastChange == a.LastChange {
		t.Errorf("seed 2 converged at the same instant as seed 1 (%s)", a.LastChange)
	}
	for _, r := range []*Result{a, c} {
		if !r.Converged || r.TotalMoves() == 0 {
			t.Errorf("%+v", r)
		}
	}
}
