package rdb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const testLibrary = "#!lua name=rdbtestlib\nredis.register_function('rdbtestfn', function(keys, args) return 1 end)"

// readAll reads every entry of an RDB file.
func readAll(data []byte) ([]*Entry, *Reader, error) {
	r, err := NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, nil, err
	}
	var out []*Entry
	for {
		e, err := r.Next()
		if err == io.EOF {
			return out, r, nil
		}
		if err != nil {
			return out, r, err
		}
		out = append(out, e)
	}
}

// saveRDB fills a fresh Redis with the keys of every diff case (key
// "k<i>", in database 0 or 1) and returns the dump.rdb it saves and the
// expected entries.
func saveRDB(t *testing.T, extra ...string) ([]byte, map[string]*Entry) {
	c, dir := startRedis(t, extra...)
	ctx := context.Background()
	want := map[string]*Entry{}
	for i, tc := range diffCases() {
		db := i % 2
		key := fmt.Sprintf("k%d", i)
		var cmds [][]any
		cmds = append(cmds, cmd("SELECT", db))
		for _, cm := range tc.cmds {
			cm2 := append([]any(nil), cm...)
			for j := range cm2 {
				if cm2[j] == "k" {
					cm2[j] = key
				}
			}
			cmds = append(cmds, cm2)
		}
		// One connection, so that SELECT applies.
		conn := c.Conn()
		for _, cm := range cmds {
			if err := conn.Do(ctx, cm...).Err(); err != nil {
				t.Fatalf("%v: %v", cm, err)
			}
		}
		e := &Entry{DB: db, Key: []byte(key), Idle: -1, Freq: -1}
		if i%3 == 0 {
			at := time.Now().Add(time.Hour).UnixMilli() + int64(i)
			if err := conn.Do(ctx, "PEXPIREAT", key, at).Err(); err != nil {
				t.Fatal(err)
			}
			e.ExpireMs = at
		}
		v, err := fetchValueConn(ctx, conn, key)
		if err != nil {
			t.Fatal(err)
		}
		e.Value = v
		want[key] = e
		conn.Close()
	}
	if err := c.Do(ctx, "FUNCTION", "LOAD", testLibrary).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "dump.rdb"))
	if err != nil {
		t.Fatal(err)
	}
	return data, want
}

func checkEntries(t *testing.T, data []byte, want map[string]*Entry) {
	t.Helper()
	entries, r, err := readAll(data)
	if err != nil {
		t.Fatal(err)
	}
	if r.Version() != 10 {
		t.Errorf("version %d", r.Version())
	}
	if r.Offset() != int64(len(data)) {
		t.Errorf("offset %d after the end, file of %d bytes", r.Offset(), len(data))
	}
	if r.SkippedFunctions() != 1 {
		t.Errorf("skipped %d functions, want 1", r.SkippedFunctions())
	}
	if len(entries) != len(want) {
		t.Errorf("%d entries, want %d", len(entries), len(want))
	}
	for _, e := range entries {
		w := want[string(e.Key)]
		if w == nil {
			t.Errorf("unexpected key %q", e.Key)
			continue
		}
		if e.DB != w.DB || e.ExpireMs != w.ExpireMs || e.Idle != w.Idle || e.Freq != w.Freq {
			t.Errorf("key %q: db %d expire %d idle %d freq %d, want %d %d %d %d", e.Key, e.DB, e.ExpireMs, e.Idle, e.Freq, w.DB, w.ExpireMs, w.Idle, w.Freq)
		}
		if d := diffValues(e.Value, w.Value); d != "" {
			t.Errorf("key %q differs:\n%s", e.Key, d)
		}
	}
}

func TestReaderRedisFile(t *testing.T) {
	data, want := saveRDB(t)
	checkEntries(t, data, want)

	t.Run("truncated", func(t *testing.T) {
		// Every offset of the header and the end, a sample in between.
		var offsets []int
		for n := 0; n < len(data); n++ {
			if n < 1000 || n > len(data)-1000 || n%(1+len(data)/500) == 0 {
				offsets = append(offsets, n)
			}
		}
		for _, n := range offsets {
			_, _, err := readAll(data[:n])
			if err == nil {
				t.Fatalf("file truncated to %d bytes: no error", n)
			}
			if n >= 9 && (!errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "truncated")) {
				t.Fatalf("file truncated to %d bytes: %v", n, err)
			}
		}
	})
	t.Run("checksum", func(t *testing.T) {
		bad := bytes.Clone(data)
		bad[len(bad)-20] ^= 1 // a byte of the last key or of the EOF area
		_, _, err := readAll(bad)
		if err == nil {
			t.Fatal("flipped byte: no error")
		}
		bad = bytes.Clone(data)
		bad[len(bad)-1] ^= 1 // the checksum itself
		if _, _, err := readAll(bad); err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
			t.Fatalf("flipped checksum: %v", err)
		}
		// A zero checksum is not verified.
		zero := bytes.Clone(data)
		copy(zero[len(zero)-8:], make([]byte, 8))
		if _, _, err := readAll(zero); err != nil {
			t.Fatalf("zero checksum: %v", err)
		}
	})
	t.Run("header", func(t *testing.T) {
		for _, h := range []string{"REDIS0013", "REDIS0000", "RODIS0010", "REDIS00a0", "RED"} {
			if _, err := NewReader(strings.NewReader(h)); err == nil {
				t.Errorf("header %q accepted", h)
			}
		}
		if _, err := NewReader(strings.NewReader("REDIS0013")); err == nil || !strings.Contains(err.Error(), "unsupported RDB version 13") {
			t.Errorf("version 13: %v", err)
		}
	})
}

// TestReaderCompressedNodes reads a file whose quicklist nodes are
// LZF-compressed (list-compress-depth 1) and with LFU frequencies.
func TestReaderCompressedNodes(t *testing.T) {
	data, want := saveRDB(t, "--list-compress-depth", "1", "--maxmemory-policy", "allkeys-lfu")
	for _, e := range want {
		e.Freq = -2 // any
	}
	entries, _, err := readAll(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(want) {
		t.Fatalf("%d entries, want %d", len(entries), len(want))
	}
	for _, e := range entries {
		w := want[string(e.Key)]
		if e.Freq < 0 || e.Idle != -1 {
			t.Errorf("key %q: freq %d idle %d", e.Key, e.Freq, e.Idle)
		}
		if d := diffValues(e.Value, w.Value); d != "" {
			t.Errorf("key %q differs:\n%s", e.Key, d)
		}
	}
}
