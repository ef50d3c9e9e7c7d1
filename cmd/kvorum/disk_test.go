package main

import (
	"bytes"
	"context"
	"io/fs"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/kvorum/kvorum/internal/server"
)

func TestParseMinFreeDisk(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
	}{
		{nil, 0}, // server default (256 MiB)
		{[]string{"--min-free-disk", "1GiB"}, 1 << 30},
		{[]string{"--min-free-disk", "512M"}, 512 << 20},
		{[]string{"--min-free-disk", "0"}, -1}, // disabled
	} {
		f, err := parseStart(append([]string{"--data-dir", "/d"}, c.args...), nil)
		if err != nil || f.cfg.MinFreeDisk != c.want {
			t.Errorf("%v: MinFreeDisk %v, %v; want %d", c.args, f.cfg.MinFreeDisk, err, c.want)
		}
	}
	if _, err := parseStart([]string{"--data-dir", "/d", "--min-free-disk", "-5"}, nil); err == nil {
		t.Error("--min-free-disk -5 accepted")
	}
	_, out, _ := runCmd("start", "--help")
	if !strings.Contains(out, "(default 256MiB)") {
		t.Errorf("start --help does not show --min-free-disk's default:\n%s", out)
	}
}

// TestStartExitsOnStorageFailure: when the node's fsync fails, `kvorum
// start` exits with status 1 and the storage failure as its last word,
// not a panic.
func TestStartExitsOnStorageFailure(t *testing.T) {
	var failSync atomic.Bool
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		switch op.Kind {
		case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			if failSync.Load() && strings.HasSuffix(op.Path, ".log") {
				return &fs.PathError{Op: "sync", Path: op.Path, Err: syscall.EIO}
			}
		}
		return nil
	})
	startNode := func(cfg server.Config) (*server.Node, error) {
		cfg.FS = errorfs.Wrap(vfs.NewCrashableMem(), inj)
		n, err := server.Start(cfg)
		// From now on the WAL cannot be synced: the single node's first
		// election (its vote must be persisted) fails.
		failSync.Store(true)
		return n, err
	}
	done := make(chan struct{})
	var code int
	var errOut string
	go func() {
		defer close(done)
		var stdout, stderr bytes.Buffer
		err := runStartWith(context.Background(), []string{"--id", "1", "--data-dir", "/d", "--client-addr", "127.0.0.1:0",
			"--peer-addr", "127.0.0.1:0", "--admin-addr", "-", "--tick-interval", "10ms"}, &stdout, &stderr, startNode)
		code = exitCode("start", err, &stderr)
		errOut = stderr.String()
	}()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("kvorum start kept running after its fsync failed")
	}
	t.Logf("exit %d, stderr:\n%s", code, errOut)
	if code != exitError {
		t.Errorf("exit code %d, want %d", code, exitError)
	}
	last := strings.TrimSpace(errOut)
	if i := strings.LastIndex(last, "\n"); i >= 0 {
		last = last[i+1:]
	}
	for _, want := range []string{"kvorum start: storage failure: fsync failed", "node stopped; it must be restarted after the disk is fixed"} {
		if !strings.Contains(last, want) {
			t.Errorf("last line of stderr %q lacks %q; stderr:\n%s", last, want, errOut)
		}
	}
	if strings.Contains(errOut, "goroutine ") || strings.Contains(errOut, "panic") {
		t.Errorf("stderr shows a panic:\n%s", errOut)
	}
}

func TestParseStorageSizes(t *testing.T) {
	for _, c := range []struct {
		flag string
		get  func(*startFlags) int
	}{
		{"--cache-size", func(f *startFlags) int { return f.cfg.CacheSize }},
		{"--memtable-size", func(f *startFlags) int { return f.cfg.MemTableSize }},
	} {
		f, err := parseStart([]string{"--data-dir", "/d", c.flag, "256M"}, nil)
		if err != nil || c.get(f) != 256<<20 {
			t.Fatalf("%s 256M: got %v, %v", c.flag, c.get(f), err)
		}
		if f, err := parseStart([]string{"--data-dir", "/d"}, nil); err != nil || c.get(f) != 0 {
			t.Fatalf("no %s: got %v (want 0, the storage default), %v", c.flag, c.get(f), err)
		}
		for _, bad := range []string{"0", "-1", "lots"} {
			if _, err := parseStart([]string{"--data-dir", "/d", c.flag, bad}, nil); err == nil {
				t.Errorf("%s %s accepted", c.flag, bad)
			}
		}
	}
}

func TestParseRecordCache(t *testing.T) {
	f, err := parseStart([]string{"--data-dir", "/d", "--record-cache", "5000"}, nil)
	if err != nil || f.cfg.RecordCache != 5000 {
		t.Fatalf("--record-cache 5000: RecordCache %v, %v", f.cfg.RecordCache, err)
	}
	if f, err := parseStart([]string{"--data-dir", "/d"}, nil); err != nil || f.cfg.RecordCache != server.DefaultRecordCache {
		t.Fatalf("no --record-cache: RecordCache %v, %v", f.cfg.RecordCache, err)
	}
	for _, bad := range []string{"0", "-1", "lots"} {
		if _, err := parseStart([]string{"--data-dir", "/d", "--record-cache", bad}, nil); err == nil {
			t.Errorf("--record-cache %s accepted", bad)
		}
	}
}

func TestParseReadCache(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
	}{
		{nil, server.DefaultReadCache},
		{[]string{"--read-cache", "64MiB"}, 64 << 20},
		{[]string{"--read-cache", "0"}, -1}, // server.Config: negative is none
	} {
		f, err := parseStart(append([]string{"--data-dir", "/d"}, c.args...), nil)
		if err != nil || f.cfg.ReadCache != c.want {
			t.Errorf("%v: ReadCache %v, %v; want %v", c.args, f.cfg.ReadCache, err, c.want)
		}
	}
	for _, bad := range []string{"-1", "x", "1Q"} {
		if _, err := parseStart([]string{"--data-dir", "/d", "--read-cache", bad}, nil); err == nil {
			t.Errorf("--read-cache %s accepted", bad)
		}
	}
}

// TestParseRangeSplitSize: --range-split-size takes a size (off, 0, by
// default), and refuses negative sizes, non-sizes and sizes below 1MiB.
func TestParseRangeSplitSize(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int64
	}{
		{nil, 0}, // off
		{[]string{"--range-split-size", "0"}, 0},
		{[]string{"--range-split-size", "96MiB"}, 96 << 20},
		{[]string{"--range-split-size", "1M"}, 1 << 20},
		{[]string{"--range-split-size", "2G"}, 2 << 30},
	} {
		f, err := parseStart(append([]string{"--data-dir", "/d"}, c.args...), nil)
		if err != nil || f.cfg.RangeSplitSize != c.want {
			t.Errorf("%v: RangeSplitSize %v, %v; want %d", c.args, f.cfg.RangeSplitSize, err, c.want)
		}
	}
	for _, c := range []struct{ arg, msg string }{
		{"-1", "not a size"},
		{"-96MiB", "not a size"},
		{"lots", "not a size"},
		{"1", "below the minimum of 1MiB"},
		{"512KiB", "below the minimum of 1MiB"},
		{"1048575", "below the minimum of 1MiB"},
	} {
		_, err := parseStart([]string{"--data-dir", "/d", "--range-split-size", c.arg}, nil)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("--range-split-size %s: %v, want an error with %q", c.arg, err, c.msg)
		}
	}
	_, out, _ := runCmd("start", "--help")
	for _, want := range []string{"--range-split-size SIZE", "TiKV's", "96MiB", "Keys, slots and ranges"} {
		if !strings.Contains(out, want) {
			t.Errorf("start --help lacks %q:\n%s", want, out)
		}
	}
}

// TestParseRangeSplitQPS: --range-split-qps takes a rate (off, 0, by
// default), and refuses negative rates and non-numbers; --help describes
// it next to --range-split-size.
func TestParseRangeSplitQPS(t *testing.T) {
	for _, c := range []struct {
		args []string
		want float64
	}{
		{nil, 0}, // off
		{[]string{"--range-split-qps", "0"}, 0},
		{[]string{"--range-split-qps", "2500"}, 2500},
		{[]string{"--range-split-qps", "0.5"}, 0.5},
		{[]string{"--range-split-qps", "1e3", "--range-split-size", "64MiB"}, 1000},
	} {
		f, err := parseStart(append([]string{"--data-dir", "/d"}, c.args...), nil)
		if err != nil || f.cfg.RangeSplitQPS != c.want {
			t.Errorf("%v: RangeSplitQPS %v, %v; want %v", c.args, f.cfg.RangeSplitQPS, err, c.want)
		}
	}
	for _, c := range []struct{ arg, msg string }{
		{"-1", "must be a non-negative number"},
		{"-0.5", "must be a non-negative number"},
		{"NaN", "must be a non-negative number"},
		{"+Inf", "must be a non-negative number"},
		{"lots", "invalid value"},
	} {
		_, err := parseStart([]string{"--data-dir", "/d", "--range-split-qps", c.arg}, nil)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("--range-split-qps %s: %v, want an error with %q", c.arg, err, c.msg)
		}
	}
	_, out, _ := runCmd("start", "--help")
	for _, want := range []string{"--range-split-qps N", "halves its sampled load", "not those sent to other nodes", "CROSSRANGE"} {
		if !strings.Contains(out, want) {
			t.Errorf("start --help lacks %q:\n%s", want, out)
		}
	}
	if i, j := strings.Index(out, "--range-split-size"), strings.Index(out, "--range-split-qps"); i < 0 || j < i {
		t.Errorf("start --help: --range-split-qps not after --range-split-size")
	}
}
