package chaos

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func scheduleConfig(seed int64, nodes int, kinds []Kind) ScheduleConfig {
	return ScheduleConfig{Seed: seed, Nodes: nodes, Kinds: kinds, IntervalMin: 2 * time.Second,
		IntervalMax: 4 * time.Second, Duration: 5 * time.Minute, ElectionTimeout: 500 * time.Millisecond}
}

func TestScheduleSameSeedSameSchedule(t *testing.T) {
	a := NewSchedule(scheduleConfig(42, 5, AllKinds))
	b := NewSchedule(scheduleConfig(42, 5, AllKinds))
	if len(a) == 0 {
		t.Fatal("empty schedule")
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("same seed, different schedules:\n%v\n%v", a, b)
	}
	c := NewSchedule(scheduleConfig(43, 5, AllKinds))
	if reflect.DeepEqual(a, c) {
		t.Fatal("seeds 42 and 43 gave the same schedule")
	}
}

func TestScheduleShape(t *testing.T) {
	for _, nodes := range []int{3, 5} {
		cfg := scheduleConfig(7, nodes, AllKinds)
		steps := NewSchedule(cfg)
		var covered time.Duration
		seen := map[Kind]int{}
		shapes := map[Shape]int{}
		for i, s := range steps {
			seen[s.Kind]++
			if s.Wait < cfg.IntervalMin || s.Wait > cfg.IntervalMax {
				t.Errorf("step %d: wait %v outside [%v, %v]", i, s.Wait, cfg.IntervalMin, cfg.IntervalMax)
			}
			switch s.Kind {
			case KindPause:
				// Longer than the longest randomized election timeout (2x).
				if s.Hold < 2*cfg.ElectionTimeout {
					t.Errorf("step %d: pause of %v is not longer than 2 election timeouts", i, s.Hold)
				}
			case KindPartition:
				shapes[s.Shape]++
				if s.Shape == ShapeSplit && nodes < 5 {
					t.Errorf("step %d: split with %d nodes", i, nodes)
				}
				if s.Hold <= 0 {
					t.Errorf("step %d: partition without hold", i)
				}
			case KindKill:
				if s.Hold <= 0 {
					t.Errorf("step %d: kill without downtime", i)
				}
			}
			covered += s.Wait + s.Hold
		}
		if covered < cfg.Duration {
			t.Errorf("%d nodes: schedule covers %v < %v", nodes, covered, cfg.Duration)
		}
		for _, k := range AllKinds {
			if seen[k] == 0 {
				t.Errorf("%d nodes: no %s fault in %d steps", nodes, k, len(steps))
			}
		}
		want := []Shape{ShapeIsolateLeader, ShapeIsolateFollower, ShapeOneWay}
		if nodes == 5 {
			want = append(want, ShapeSplit)
		}
		for _, sh := range want {
			if shapes[sh] == 0 {
				t.Errorf("%d nodes: no %s partition", nodes, sh)
			}
		}
	}
}

func TestScheduleKindsSubset(t *testing.T) {
	steps := NewSchedule(scheduleConfig(1, 3, []Kind{KindPause}))
	for _, s := range steps {
		if s.Kind != KindPause {
			t.Fatalf("kind %s in a pause-only schedule", s.Kind)
		}
	}
	if NewSchedule(scheduleConfig(1, 3, nil)) != nil {
		t.Fatal("schedule without kinds")
	}
}

func TestParseKinds(t *testing.T) {
	good := map[string][]Kind{
		"kill,pause,restart,partition": AllKinds,
		"all":                          AllKinds,
		"partition, KILL":              {KindKill, KindPartition},
		"pause,pause":                  {KindPause},
	}
	for in, want := range good {
		got, err := ParseKinds(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseKinds(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "kill,", "reboot", "kill,nuke"} {
		if _, err := ParseKinds(in); err == nil {
			t.Errorf("ParseKinds(%q): no error", in)
		}
	}
}

func validConfig() Config {
	return Config{Nodes: 3, Duration: time.Second, Kinds: AllKinds, IntervalMin: time.Second, IntervalMax: 2 * time.Second,
		Clients: 4, Keys: 3, OpTimeout: time.Second, Network: ModeAuto, Binary: "/bin/true",
		TickInterval: 50 * time.Millisecond, ElectionTicks: 10, HeartbeatTicks: 1, RequestTimeout: time.Second,
		SnapshotThreshold: 100, RecoveryTimeout: time.Second, CheckTimeout: time.Second}
}

func TestConfigValidate(t *testing.T) {
	c := validConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		mut  func(*Config)
		want string
	}{
		{func(c *Config) { c.Nodes = 4 }, "--nodes must be 3 or 5"},
		{func(c *Config) { c.Duration = 0 }, "--duration"},
		{func(c *Config) { c.IntervalMax = 0 }, "--interval"},
		{func(c *Config) { c.Clients = 0 }, "--clients"},
		{func(c *Config) { c.Network = "docker" }, "docker is not implemented"},
		{func(c *Config) { c.Network = "tcp" }, "--network must be"},
		{func(c *Config) { c.Network, c.Subnet = ModeProxy, "10.1.2.0/24" }, "--subnet applies to --network netns"},
		{func(c *Config) { c.Subnet = "10.1.0.0/16" }, "want an IPv4 /24"},
		{func(c *Config) { c.Subnet = "bogus" }, "--subnet"},
		{func(c *Config) { c.ElectionTicks = 1 }, "--election-ticks"},
		{func(c *Config) { c.TickInterval = 0 }, "--tick-interval"},
		{func(c *Config) { c.RecoveryTimeout = 0 }, "--recovery-timeout"},
	}
	for _, b := range bad {
		c := validConfig()
		b.mut(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("got %v, want an error containing %q", err, b.want)
		}
	}
}

func TestSubnetPrefix(t *testing.T) {
	p, err := subnetPrefix("10.213.7.0/24")
	if err != nil || p != "10.213.7." {
		t.Fatalf("got %q, %v", p, err)
	}
}
