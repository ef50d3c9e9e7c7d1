package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvorum/kvorum/internal/rdb"
)

var importHelp = helpText{
	usage: `kvorum import --rdb FILE [--addr HOST:PORT] [--user NAME] [--password PW]
    [--tls [--cacert FILE] [--cert FILE --key FILE]] [--replace] [--db N | --all-dbs]
    [--batch N] [--progress auto|always|never]`,
	description: `
Loads the keys of a Redis RDB file (what BGSAVE writes, or 'redis-cli --rdb
FILE' fetches from a running Redis) into a kvorum cluster, through any node:
each key is sent as RESTORE key deadline payload ABSTTL [REPLACE], the
payload re-encoded by kvorum from the file's value, in pipelined batches.
Every type kvorum has is imported: strings (HyperLogLogs and bitmaps
included), lists, sets, sorted sets, hashes, streams with their consumer
groups, pending entries and consumers. Expiry deadlines are kept as they
are in the file (absolute times); keys already expired are skipped and
counted. Function libraries are skipped and counted (load them with
FUNCTION RESTORE, from 'redis-cli FUNCTION DUMP'). A module type is an
error.

kvorum has one database: by default only the keys of database 0 (--db)
are imported and those of the others counted; --all-dbs puts the keys of
every database into kvorum's (a name in several databases then fails with
BUSYKEY after the first unless --replace).

Without --replace an existing key fails with BUSYKEY and is counted as an
error; with it, the file's value replaces it. A key whose payload is
larger than the nodes' --max-value-size (64 MiB by default) fails too.
Progress (bytes read, keys per second) goes to stderr when it is a
terminal; the summary (keys per type, skipped keys, errors) to stdout.
The password may also come from the environment variable REDISCLI_AUTH,
as for redis-cli.

SIGINT or SIGTERM stops the import after the batch under way, with the
summary. Exit status: 0 if every key was imported or skipped; 1 if a key
failed, the import was interrupted, the file is unreadable, truncated,
corrupt or of an unknown version (the message says how many keys were
imported before), or the cluster is unreachable; 2 on a bad command line.`,
	groups: []flagGroup{
		{"Flags", []string{"rdb", "addr", "replace", "db", "all-dbs", "batch", "progress"}},
		{"Connection security", []string{"user", "password", "tls", "cacert", "cert", "key", "insecure"}},
	},
}

type importFlags struct {
	fs             *flag.FlagSet
	file, addr     string
	user, password string
	tls, insecure  bool
	caFile         string
	certFile       string
	keyFile        string
	replace        bool
	db             int
	allDBs         bool
	batch          int
	progress       string
}

func newImportFlags() *importFlags {
	f := &importFlags{fs: flag.NewFlagSet("import", flag.ContinueOnError)}
	f.fs.StringVar(&f.file, "rdb", "", "the RDB `FILE` to import (required)")
	f.fs.StringVar(&f.addr, "addr", "127.0.0.1:6379", "`HOST:PORT` of a kvorum node's client port")
	f.fs.StringVar(&f.user, "user", "", "ACL user `NAME` to AUTH as (default: the default user)")
	f.fs.StringVar(&f.password, "password", "", "`PASSWORD` to AUTH with (default: $REDISCLI_AUTH, else no AUTH)")
	f.fs.BoolVar(&f.tls, "tls", false, "connect with TLS (the node's --tls-port)")
	f.fs.StringVar(&f.caFile, "cacert", "", "`FILE` of PEM CA certificates the node's certificate must chain to\n(default: the system's)")
	f.fs.StringVar(&f.certFile, "cert", "", "`FILE` with a PEM client certificate (for --tls-auth-clients)")
	f.fs.StringVar(&f.keyFile, "key", "", "`FILE` with the PEM private key of --cert")
	f.fs.BoolVar(&f.insecure, "insecure", false, "with --tls, do not verify the node's certificate")
	f.fs.BoolVar(&f.replace, "replace", false, "replace keys that exist (RESTORE ... REPLACE); without it they fail with BUSYKEY")
	f.fs.IntVar(&f.db, "db", 0, "import the keys of database `N` of the file")
	f.fs.BoolVar(&f.allDBs, "all-dbs", false, "import the keys of every database of the file into kvorum's one database")
	f.fs.IntVar(&f.batch, "batch", 100, "RESTORE commands per pipelined batch (`N`, 1-10000)")
	f.fs.StringVar(&f.progress, "progress", "auto", "progress on stderr, `MODE` auto (when stderr is a terminal), always or never")
	return f
}

func parseImport(args []string, stdout io.Writer) (*importFlags, error) {
	f := newImportFlags()
	if err := parseFlags("import", f.fs, importHelp, args, stdout); err != nil {
		return nil, err
	}
	bad := func(format string, a ...any) error { return usageErrorf("import", format, a...) }
	switch {
	case f.fs.NArg() > 0:
		return nil, bad("unexpected argument %q", f.fs.Arg(0))
	case f.file == "":
		return nil, bad("--rdb FILE is required")
	case f.batch < 1 || f.batch > 10000:
		return nil, bad("--batch must be between 1 and 10000")
	case f.db < 0:
		return nil, bad("--db must be >= 0")
	case f.allDBs && f.db != 0:
		return nil, bad("--db and --all-dbs exclude each other")
	case (f.certFile == "") != (f.keyFile == ""):
		return nil, bad("--cert and --key go together")
	case !f.tls && (f.caFile != "" || f.certFile != "" || f.insecure):
		return nil, bad("--cacert, --cert, --key and --insecure need --tls")
	}
	switch f.progress {
	case "auto", "always", "never":
	default:
		return nil, bad("--progress must be auto, always or never")
	}
	if f.password == "" {
		f.password = os.Getenv("REDISCLI_AUTH")
	}
	return f, nil
}

// importStats is what an import did.
type importStats struct {
	imported     int64
	perType      map[string]int64
	expired      int64
	otherDBs     map[int]int64
	failed       int64
	failures     []string // the first few, for the summary
	functions    int
	version      int
	bytes, total int64
}

const maxReportedFailures = 10

// maxBatchBytes bounds the payloads of one pipelined batch: a batch of big
// keys goes out before it has --batch commands.
const maxBatchBytes = 8 << 20

func (s *importStats) fail(key []byte, err error) {
	s.failed++
	if len(s.failures) < maxReportedFailures {
		s.failures = append(s.failures, fmt.Sprintf("%q: %v", key, err))
	}
}

func runImport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseImport(args, stdout)
	if err != nil {
		return err
	}
	file, err := os.Open(f.file)
	if err != nil {
		return err
	}
	defer file.Close()
	st := &importStats{perType: map[string]int64{}, otherDBs: map[int]int64{}}
	if fi, err := file.Stat(); err == nil {
		st.total = fi.Size()
	}
	opts := &redis.Options{Addr: f.addr, Username: f.user, Password: f.password,
		ReadTimeout: time.Minute, WriteTimeout: time.Minute, DisableIdentity: true}
	if f.tls {
		c, err := clientTLSConfig(f.caFile, f.certFile, f.keyFile)
		if err != nil {
			return err
		}
		c.InsecureSkipVerify = f.insecure //nolint:gosec // asked for with --insecure
		opts.TLSConfig = c
	}
	redis.SetLogger(quietLogger{}) // its dial retries: the errors are reported once, below
	client := redis.NewClient(opts)
	defer client.Close()
	if err := client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("cannot reach kvorum at %s: %v", f.addr, err)
	}
	showProgress := f.progress == "always" || f.progress == "auto" && isTerminal(stderr)
	start := time.Now()
	err = importRDB(ctx, f, bufio.NewReaderSize(file, 1<<20), client, st, func() {
		if showProgress {
			writeImportProgress(stderr, st, time.Since(start))
		}
	})
	if showProgress {
		writeImportProgress(stderr, st, time.Since(start))
		fmt.Fprintln(stderr)
	}
	writeImportSummary(stdout, f, st, time.Since(start))
	if err != nil {
		return &exitErr{code: exitError, msg: fmt.Sprintf("kvorum import: %v (%d keys were imported before the error)", err, st.imported)}
	}
	if st.failed > 0 {
		return &exitErr{code: exitError, msg: fmt.Sprintf("kvorum import: %d keys failed", st.failed)}
	}
	return nil
}

// importRDB reads the file from r and restores its keys through client,
// batch by batch, calling progress now and then.
func importRDB(ctx context.Context, f *importFlags, r io.Reader, client *redis.Client, st *importStats, progress func()) error {
	counter := &progressReader{r: r}
	rd, err := rdb.NewReader(counter)
	if err != nil {
		return fmt.Errorf("%s: %v", f.file, err)
	}
	st.version = rd.Version()
	type pending struct {
		key  []byte
		kind string
		cmd  *redis.StatusCmd
	}
	var batch []pending
	batchBytes := 0
	pipe := client.Pipeline()
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		_, _ = pipe.Exec(context.WithoutCancel(ctx)) // each command's error is its own; an interrupt lets the batch finish
		for _, p := range batch {
			var re redis.Error
			if err := p.cmd.Err(); err != nil && !errors.As(err, &re) {
				return fmt.Errorf("kvorum at %s: %v", f.addr, err) // the connection's, not a reply
			} else if err != nil {
				st.fail(p.key, err)
				continue
			}
			st.imported++
			st.perType[p.kind]++
		}
		batch, batchBytes = batch[:0], 0
		return nil
	}
	last := time.Now()
	for {
		if err := ctx.Err(); err != nil {
			if ferr := flush(); ferr != nil {
				return ferr
			}
			return fmt.Errorf("interrupted at byte %d of %s", st.bytes, f.file)
		}
		e, err := rd.Next()
		st.bytes = max(rd.Offset(), counter.n)
		st.functions = rd.SkippedFunctions()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if ferr := flush(); ferr != nil {
				return ferr
			}
			return fmt.Errorf("%s: reading at byte %d: %v", f.file, rd.Offset(), err)
		}
		if !f.allDBs && e.DB != f.db {
			st.otherDBs[e.DB]++
			continue
		}
		if e.ExpireMs != 0 && e.ExpireMs <= time.Now().UnixMilli() {
			st.expired++
			continue
		}
		payload, err := rdb.EncodeDump(e.Value, rdb.EncodeOptions{Compress: true}) // redis-server 7.0's defaults
		if err != nil {
			st.fail(e.Key, err)
			continue
		}
		args := []any{"RESTORE", e.Key, strconv.FormatInt(e.ExpireMs, 10), payload, "ABSTTL"}
		if f.replace {
			args = append(args, "REPLACE")
		}
		cmd := redis.NewStatusCmd(ctx, args...)
		_ = pipe.Process(ctx, cmd)
		batch = append(batch, pending{key: e.Key, kind: e.Value.Kind.String(), cmd: cmd})
		batchBytes += len(payload) + len(e.Key)
		if len(batch) >= f.batch || batchBytes >= maxBatchBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		if time.Since(last) >= 200*time.Millisecond {
			progress()
			last = time.Now()
		}
	}
	st.functions = rd.SkippedFunctions()
	return flush()
}

// quietLogger drops go-redis's log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func writeImportProgress(w io.Writer, st *importStats, elapsed time.Duration) {
	rate := float64(st.imported) / max(elapsed.Seconds(), 1e-3)
	pct := ""
	if st.total > 0 {
		pct = fmt.Sprintf(" (%.0f%%)", 100*float64(st.bytes)/float64(st.total))
	}
	fmt.Fprintf(w, "\r%s / %s read%s, %d keys imported, %.0f keys/s, %d failed   ",
		mib(st.bytes), mib(st.total), pct, st.imported, rate, st.failed)
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func writeImportSummary(w io.Writer, f *importFlags, st *importStats, elapsed time.Duration) {
	if st.version == 0 {
		return // not an RDB file: nothing was read
	}
	fmt.Fprintf(w, "imported %d keys from %s (RDB version %d) in %v\n", st.imported, f.file, st.version, elapsed.Round(time.Millisecond))
	var types []string
	for _, k := range []string{"string", "list", "set", "zset", "hash", "stream"} {
		if n := st.perType[k]; n > 0 {
			types = append(types, fmt.Sprintf("%s %d", k, n))
		}
	}
	if len(types) > 0 {
		fmt.Fprintf(w, "  by type: %s\n", strings.Join(types, ", "))
	}
	fmt.Fprintf(w, "  skipped: %d expired keys, %d function libraries", st.expired, st.functions)
	if len(st.otherDBs) > 0 {
		dbs := make([]int, 0, len(st.otherDBs))
		var n int64
		for db, c := range st.otherDBs {
			dbs = append(dbs, db)
			n += c
		}
		sort.Ints(dbs)
		var parts []string
		for _, db := range dbs {
			parts = append(parts, fmt.Sprintf("db %d: %d", db, st.otherDBs[db]))
		}
		fmt.Fprintf(w, ", %d keys of other databases (%s; --all-dbs imports them)", n, strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  errors: %d\n", st.failed)
	for _, s := range st.failures {
		fmt.Fprintf(w, "    %s\n", s)
	}
	if int64(len(st.failures)) < st.failed {
		fmt.Fprintf(w, "    ... and %d more\n", st.failed-int64(len(st.failures)))
	}
}
