package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/kvorum/kvorum/internal/admin"
	"github.com/kvorum/kvorum/internal/server"
	"github.com/kvorum/kvorum/internal/storage"
)

// kvorum ctl backup and kvorum restore: see internal/server/backup.go.

// backup streams GET /v1/backup into out.part, verifies it and renames it
// to out.
func (c *ctlClient) backup(ctx context.Context, out string, timeout time.Duration, stdout, stderr io.Writer) error {
	if _, err := os.Stat(out); err == nil {
		return fmt.Errorf("%s exists: backup does not overwrite files", out)
	}
	part := out + ".part"
	f, err := os.OpenFile(part, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("%v (a backup left from an interrupted run? remove it)", err)
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			os.Remove(part)
		}
	}()
	// The client's timeout is for the backup to start (the headers); the
	// body streams as long as it takes.
	hc := *c.http
	hc.Timeout = 0
	startCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	timer := time.AfterFunc(timeout, cancel)
	req, err := http.NewRequestWithContext(startCtx, http.MethodGet, c.base+"/v1/backup", nil)
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := hc.Do(req)
	if !timer.Stop() && err != nil {
		return fmt.Errorf("no answer from kvorum admin at %s within %v", c.addr, timeout)
	}
	if err != nil {
		return fmt.Errorf("cannot reach kvorum admin at %s: %v", c.addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return fmt.Errorf("backup refused by %s: HTTP %d: %s", c.addr, resp.StatusCode, strings.TrimSpace(string(raw)))
	}
	index := resp.Header.Get(admin.HeaderBackupIndex)
	prog := newProgress(stderr, "backup at index "+index)
	n, err := io.Copy(f, &progressReader{r: resp.Body, fn: prog.update})
	prog.finish()
	if err != nil {
		return fmt.Errorf("backup stream from %s broke after %d bytes: %v", c.addr, n, err)
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	info, err := verifyBackupFile(part)
	if err != nil {
		return fmt.Errorf("the backup received from %s does not verify: %v", c.addr, err)
	}
	if err := os.Rename(part, out); err != nil {
		return err
	}
	done = true
	fmt.Fprintf(stdout, "backup %s: %d bytes, %d records, cluster %016x, index %d, term %d, from node %d, sha256 %s\n",
		out, info.Bytes, info.Pairs, info.Header.ClusterID, info.Header.Index, info.Header.Term, info.Header.NodeID, hex.EncodeToString(info.Sum[:]))
	return nil
}

func verifyBackupFile(path string) (storage.BackupInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return storage.BackupInfo{}, err
	}
	defer f.Close()
	return storage.ReadBackup(f, nil)
}

var restoreHelp = helpText{
	usage: `
kvorum restore --from FILE --id N --data-dir DIR --initial-cluster 1=HOST:PORT,...`,
	description: `
Seeds the data directory of one member of a NEW cluster with a backup made by
'kvorum ctl backup'. Run it once for every member, each with its own --id and
--data-dir and all with the same backup and the same --initial-cluster; then
start every member with 'kvorum start' and those same --id, --data-dir and
--initial-cluster. The new cluster holds exactly the backup's data, and its
log continues from the backup's index.

The backup is verified as it is read (format, checksum, length); a damaged,
truncated or foreign file is refused and nothing is written. DIR must not
exist or be empty: restore never overwrites a node's data. The data is
written next to DIR first and moved into place at the end, so an interrupted
restore leaves no half-seeded node.

Members seeded from different backups, or with different --initial-cluster
lists, get different cluster ids and refuse to talk to each other.`,
	groups: []flagGroup{{"Flags", []string{"from", "id", "data-dir", "initial-cluster"}}},
}

type restoreFlags struct {
	fs             *flag.FlagSet
	from           string
	id             uint64
	dataDir        string
	initialCluster string
}

func newRestoreFlags() *restoreFlags {
	f := &restoreFlags{fs: flag.NewFlagSet("restore", flag.ContinueOnError)}
	f.fs.StringVar(&f.from, "from", "", "the backup `FILE` ('kvorum ctl backup --out')")
	f.fs.Uint64Var(&f.id, "id", 0, "this member's node `ID` in the new cluster")
	f.fs.StringVar(&f.dataDir, "data-dir", "", "the new member's data `DIR` (must not exist or be empty)")
	f.fs.StringVar(&f.initialCluster, "initial-cluster", "", "the new cluster's members, `ID=HOST:PORT`,... as 'kvorum start' will be given them")
	return f
}

func runRestore(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newRestoreFlags()
	if err := parseFlags("restore", f.fs, restoreHelp, args, stdout); err != nil {
		return err
	}
	bad := func(format string, a ...any) error { return usageErrorf("restore", format, a...) }
	if f.fs.NArg() > 0 {
		return bad("unexpected argument %q", f.fs.Arg(0))
	}
	switch {
	case f.from == "":
		return bad("--from FILE is required")
	case f.id == 0:
		return bad("--id is required")
	case f.dataDir == "":
		return bad("--data-dir is required")
	case f.initialCluster == "":
		return bad("--initial-cluster is required (the new cluster's members)")
	}
	cluster, err := parseInitialCluster(f.initialCluster)
	if err != nil {
		return bad("--initial-cluster: %v", err)
	}
	if _, ok := cluster[f.id]; !ok {
		return bad("--initial-cluster does not list this node's id %d (it lists %s)", f.id, idList(cluster))
	}
	in, err := os.Open(f.from)
	if err != nil {
		return err
	}
	defer in.Close()
	var size int64
	if st, err := in.Stat(); err == nil {
		size = st.Size()
	}
	prog := newProgress(stderr, "restore")
	prog.total = size
	info, err := server.Restore(server.RestoreConfig{From: &progressReader{r: in, fn: prog.update}, DataDir: f.dataDir, ID: f.id, InitialCluster: cluster})
	prog.finish()
	if err != nil {
		if errors.Is(err, storage.ErrNotBackup) {
			return fmt.Errorf("%s: %v", f.from, err)
		}
		return fmt.Errorf("%s: %v; nothing was written", f.from, err)
	}
	fmt.Fprintf(stdout, "restored %d records at index %d (backup of cluster %016x, sha256 %s) into %s as node %d of a new cluster of %d\n",
		info.Pairs, info.Header.Index, info.Header.ClusterID, hex.EncodeToString(info.Sum[:]), f.dataDir, f.id, len(cluster))
	return nil
}

// progress prints a transfer's progress on a terminal, at most every
// 200 ms, on one line; elsewhere nothing.
type progress struct {
	w     io.Writer
	what  string
	total int64
	start time.Time
	last  time.Time
	n     int64
	shown bool
}

func newProgress(w io.Writer, what string) *progress {
	if !isTerminal(w) {
		w = nil
	}
	return &progress{w: w, what: what, start: time.Now()}
}

func (p *progress) update(n int64) {
	p.n = n
	if p.w == nil || time.Since(p.last) < 200*time.Millisecond {
		return
	}
	p.last = time.Now()
	p.shown = true
	rate := float64(n) / time.Since(p.start).Seconds() / (1 << 20)
	if p.total > 0 {
		fmt.Fprintf(p.w, "\r%s: %.1f / %.1f MiB (%.0f%%), %.1f MiB/s   ", p.what, float64(n)/(1<<20), float64(p.total)/(1<<20), 100*float64(n)/float64(p.total), rate)
		return
	}
	fmt.Fprintf(p.w, "\r%s: %.1f MiB, %.1f MiB/s   ", p.what, float64(n)/(1<<20), rate)
}

func (p *progress) finish() {
	if p.shown {
		fmt.Fprintln(p.w)
	}
}

// progressReader counts the bytes read from r and tells fn (if set) the
// count after each read.
type progressReader struct {
	r  io.Reader
	n  int64
	fn func(int64)
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.n += int64(n)
	if p.fn != nil {
		p.fn(p.n)
	}
	return n, err
}
