package kvbench

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseTargets(t *testing.T) {
	got, err := ParseTargets([]string{
		"kv=redis://127.0.0.1:6379,127.0.0.1:6380, 127.0.0.1:6381",
		"ref=redis://h:1,e=etcd://10.0.0.1:2379,10.0.0.2:2379/",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Target{
		{Name: "kv", Scheme: "redis", Addrs: []string{"127.0.0.1:6379", "127.0.0.1:6380", "127.0.0.1:6381"}},
		{Name: "ref", Scheme: "redis", Addrs: []string{"h:1"}},
		{Name: "e", Scheme: "etcd", Addrs: []string{"10.0.0.1:2379", "10.0.0.2:2379"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if got[0].URL() != "redis://127.0.0.1:6379,127.0.0.1:6380,127.0.0.1:6381" {
		t.Errorf("URL %q", got[0].URL())
	}
	if got, err := ParseTargets([]string{"v6=redis://[::1]:6379"}); err != nil || got[0].Addrs[0] != "[::1]:6379" {
		t.Errorf("IPv6: %v %v", got, err)
	}
	for spec, msg := range map[string]string{
		"redis://h:1":          "is not NAME=URL",
		"=redis://h:1":         "bad target name",
		"a b=redis://h:1":      "bad target name",
		"x=h:1":                "is not a URL",
		"x=http://h:1":         `unknown scheme "http"`,
		"x=redis://h":          `address "h" is not host:port`,
		"x=redis://:6379":      `address ":6379" is not host:port`,
		"x=redis://h:0":        "bad port",
		"x=redis://h:99999":    "bad port",
		"x=redis://h:1,,h:2":   `address "" is not host:port`,
		"x=etcd://h:1,h:port":  "bad port",
		"x=redis://h:1,y=foo:": "is not a URL",
	} {
		_, err := ParseTargets([]string{spec})
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: error %v, want %q", spec, err, msg)
		}
	}
}

func TestParsePIDs(t *testing.T) {
	m, err := ParsePIDs([]string{"a=1,2, 3", "b=42"})
	if err != nil || !reflect.DeepEqual(m, map[string][]int{"a": {1, 2, 3}, "b": {42}}) {
		t.Fatalf("%v %v", m, err)
	}
	for _, bad := range [][]string{{"a"}, {"=1"}, {"a=x"}, {"a=0"}, {"a=1", "a=2"}, {"a=1,"}} {
		if _, err := ParsePIDs(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseWorkloads(t *testing.T) {
	w, err := ParseWorkloads("load, A,c,5/95,90/10,b,insert")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range w {
		names = append(names, x.Name)
		if s := x.Read + x.Update + x.Insert; s != 1 {
			t.Errorf("%s: shares add up to %v", x.Name, s)
		}
	}
	if strings.Join(names, ",") != "load,a,c,5/95,90/10,b,insert" || !w[0].Load || w[6].Load || w[3].Update != 0.95 {
		t.Errorf("parsed %v", w)
	}
	if _, err := ParseWorkloads("a,d"); err == nil || !strings.Contains(err.Error(), `unknown workload "d"`) {
		t.Errorf("unknown workload: %v", err)
	}
	if _, err := ParseWorkloads(" , "); err == nil {
		t.Errorf("empty list accepted")
	}
}

func validConfig() Config {
	w, _ := ParseWorkloads("a")
	return Config{Workloads: w, Distribution: DistZipfian, Records: 10, ValueSize: 10, Clients: []int{1},
		Pipeline: 1, Duration: time.Second, KvorumNodes: KvorumNodesAll, Start: []string{StartRedis}}
}

func TestValidate(t *testing.T) {
	c := validConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	tg := Target{Name: "x", Scheme: SchemeRedis, Addrs: []string{"h:1"}}
	cases := []struct {
		mod func(*Config)
		msg string
	}{
		{func(c *Config) { c.Workloads = nil }, "--workloads"},
		{func(c *Config) { c.Distribution = "normal" }, "--distribution"},
		{func(c *Config) { c.Records = 0 }, "--records"},
		{func(c *Config) { c.ValueSize = 0 }, "--value-size"},
		{func(c *Config) { c.Clients = []int{4, 0} }, "--clients: 0 is not between"},
		{func(c *Config) { c.Clients = nil }, "--clients"},
		{func(c *Config) { c.Pipeline = 0 }, "--pipeline"},
		{func(c *Config) { c.Duration = 0 }, "--duration must be positive"},
		{func(c *Config) { c.Warmup = -1 }, "--warmup"},
		{func(c *Config) { c.Ops = -1 }, "--ops"},
		{func(c *Config) { c.KvorumNodes = "some" }, "--kvorum-nodes"},
		{func(c *Config) { c.Start = []string{"mysql"} }, `--start: unknown server "mysql"`},
		{func(c *Config) { c.Start = []string{"redis", "redis"} }, `target "redis" given twice`},
		{func(c *Config) { c.Targets = []Target{{Name: "redis", Scheme: SchemeRedis, Addrs: []string{"h:1"}}} }, `target "redis" given twice`},
		{func(c *Config) { c.Start = nil }, "nothing to measure"},
		{func(c *Config) { c.Baseline = "etcd" }, `--baseline "etcd" is not a target`},
		{func(c *Config) { c.PIDs = map[string][]int{"redis": {1}} }, "knows its PIDs"},
		{func(c *Config) { c.PIDs = map[string][]int{"y": {1}} }, "no --target of that name"},
		{func(c *Config) { c.Start = []string{"kvorum"} }, "no kvorum binary"},
	}
	for _, tc := range cases {
		c := validConfig()
		tc.mod(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("want %q, got %v", tc.msg, err)
		}
	}
	c = validConfig()
	c.Targets, c.PIDs, c.Baseline, c.Duration, c.Ops = []Target{tg}, map[string][]int{"x": {1}}, "x", 0, 100
	if err := c.Validate(); err != nil {
		t.Errorf("--ops without --duration, given target with PIDs as baseline: %v", err)
	}
	if got := c.TargetNames(); strings.Join(got, ",") != "x,redis" {
		t.Errorf("target order %v", got)
	}
}
