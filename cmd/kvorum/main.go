package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/kvorum/kvorum/internal/server"
)

// command is one kvorum subcommand.
type command struct {
	name    string
	summary string
	// run executes the command. ctx is cancelled on SIGINT/SIGTERM.
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	// usage writes the command's full help.
	usage func(w io.Writer)
}

func commands() []command {
	return []command{
		{"start", "run one node of a kvorum cluster", runStart, func(w io.Writer) { writeUsage(w, newStartFlags().fs, startHelp) }},
		{"demo", "run a local N-node cluster inside this process", runDemo, func(w io.Writer) { writeUsage(w, newDemoFlags().fs, demoHelp) }},
		{"ctl", "inspect and manage a running cluster through a node's admin API", runCtl, func(w io.Writer) { writeUsage(w, newCtlFlags().fs, ctlHelp) }},
		{"restore", "seed a new cluster's data directories from a backup (kvorum ctl backup)", runRestore, func(w io.Writer) { writeUsage(w, newRestoreFlags().fs, restoreHelp) }},
		{"certs", "make a throwaway CA and the certificates and admin token of a cluster, for TLS without openssl", runCerts, func(w io.Writer) { writeUsage(w, newCertsFlags().fs, certsHelp) }},
		{"import", "load a Redis RDB file (BGSAVE's, redis-cli --rdb's) into a running cluster", runImport, func(w io.Writer) { writeUsage(w, newImportFlags().fs, importHelp) }},
		{"chaos", "run a cluster of real processes under faults and check it (linearizability, no lost writes)", runChaos, func(w io.Writer) { writeUsage(w, newChaosFlags().fs, chaosHelp) }},
		{"bench", "benchmarks: locks vs Redlock and ZooKeeper (bench locks), YCSB key-value workloads vs Redis and etcd (bench kv), writes through node failures, host vs containers (bench failover)", runBench, writeBenchOverview},
		{"version", "print version information", runVersion, func(w io.Writer) { writeUsage(w, newVersionFlags(), versionHelp) }},
	}
}

func findCommand(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func main() {
	// main.version (set with -ldflags "-X main.version=...") is the source of
	// truth; the server reports it in INFO, HELLO and the admin API.
	server.Version = version
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command failed
	exitUsage = 2 // bad command line
)

// usageError is a command-line mistake: exit code 2 and a pointer to --help.
type usageError struct {
	cmd string // "" for the top level
	msg string
}

func (e *usageError) Error() string { return e.msg }

func usageErrorf(cmd, format string, args ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, args...)}
}

// errHelp reports that help was printed as asked: exit 0.
var errHelp = errors.New("help shown")

// run runs the command line args (without the program name) and returns the
// process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		writeTopUsage(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		if name == "help" && len(args) > 1 {
			c, ok := findCommand(args[1])
			if !ok {
				fmt.Fprintf(stderr, "kvorum help: unknown command %q\nRun 'kvorum help' for the list of commands.\n", args[1])
				return exitUsage
			}
			c.usage(stdout)
			return exitOK
		}
		writeTopUsage(stdout)
		return exitOK
	case "-v", "-version", "--version":
		name, args = "version", []string{"version"}
	}
	c, ok := findCommand(name)
	if !ok {
		if strings.HasPrefix(name, "-") {
			fmt.Fprintf(stderr, "kvorum: unknown flag %s (flags go after the command, e.g. kvorum start --help)\nRun 'kvorum help' for usage.\n", name)
		} else {
			fmt.Fprintf(stderr, "kvorum: unknown command %q\nRun 'kvorum help' for usage.\n", name)
		}
		return exitUsage
	}

	var ctx context.Context = context.Background()
	if c.name == "start" || c.name == "demo" || c.name == "import" {
		var stop func()
		ctx, stop = signalContext(stderr)
		defer stop()
	}
	return exitCode(c.name, c.run(ctx, args[1:], stdout, stderr), stderr)
}

// exitCode reports err (if any) on stderr and maps it to an exit code.
func exitCode(cmd string, err error, stderr io.Writer) int {
	var ue *usageError
	var ee *exitErr
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errHelp):
		return exitOK
	case errors.As(err, &ue):
		if ue.cmd != "" {
			cmd = ue.cmd // a sub-subcommand, e.g. "bench kv"
		}
		fmt.Fprintf(stderr, "kvorum %s: %s\nRun 'kvorum %s --help' for usage.\n", cmd, ue.msg, cmd)
		return exitUsage
	case errors.As(err, &ee):
		if ee.msg != "" {
			fmt.Fprintln(stderr, ee.msg)
		}
		return ee.code
	default:
		fmt.Fprintf(stderr, "kvorum %s: %v\n", cmd, err)
		return exitError
	}
}

// exitErr carries a preformatted message and exit code.
type exitErr struct {
	code int
	msg  string
}

func (e *exitErr) Error() string { return e.msg }

func writeTopUsage(w io.Writer) {
	fmt.Fprint(w, `kvorum - a Raft-replicated key-value store that speaks the Redis protocol

Usage:
  kvorum <command> [flags] [arguments]

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "  %-9s %s\n", "help", "show help for a command (kvorum help <command>)")
	fmt.Fprint(w, `
Examples:
  kvorum demo                      # 3-node cluster on ports 6379-6381
  kvorum start --id 1 --data-dir /var/lib/kvorum \
      --initial-cluster 1=10.0.0.1:7379,2=10.0.0.2:7379,3=10.0.0.3:7379 \
      --client-addr 0.0.0.0:6379 --peer-addr 10.0.0.1:7379
  kvorum ctl --addr 127.0.0.1:8379 member list

Run 'kvorum <command> --help' for the flags of a command.
`)
}

// signalContext returns a context cancelled on the first SIGINT/SIGTERM. A
// second signal exits the process at once.
func signalContext(stderr io.Writer) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			fmt.Fprintf(stderr, "\nreceived %v, shutting down (repeat to force)\n", s)
			cancel()
		case <-done:
			return
		}
		select {
		case <-ch:
			fmt.Fprintln(stderr, "received a second signal, exiting without a clean shutdown")
			os.Exit(exitError)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel()
	}
}
