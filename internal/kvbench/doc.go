// Package kvbench is `kvorum bench kv`: a YCSB-style key-value benchmark
// (paper 002, Anthony & Rao: read-heavy 90/10, balanced 50/50 and
// write-heavy 5/95 on 1-32 clients; plus YCSB's own workloads A, B, C and
// load/insert) run against kvorum and, in the same run with the same
// generator and seed, against Redis (plain and with an fsynced append-only
// file) and etcd.
//
// Keys are YCSB's: "user" followed by the FNV-1a hash of the record
// number (AppendKey). Record numbers are drawn uniformly or from YCSB's
// scrambled zipfian (theta 0.99, Scrambled). Latencies go into HDR-style
// log-bucket histograms (Histogram).
//
// # Use
//
// Run takes a Config (ParseTargets, ParseWorkloads and Validate name the
// command-line flags in their messages) and returns a Report with one Cell
// per (workload, clients, target): throughput, latency percentiles per
// operation kind, errors, the servers' CPU time (utime+stime from
// /proc/PID/stat) and RSS (with its anonymous part), and the benchmark's own CPU time. For every
// (workload, clients) pair the targets run one after another, so their
// ratios are fair on a noisy machine. Report.WriteText prints Markdown
// tables, WriteJSON the whole report, WritePNG a chart.
//
// Clients are closed-loop goroutines, one connection each. The Redis
// protocol client (respclient.go) is a few hundred lines over net.Conn and
// bufio: it writes a pipeline of commands with codec.AppendCommand,
// flushes once and reads the replies, without allocating per operation,
// because the benchmark shares the machine with the servers it measures.
// The etcd client is go.etcd.io/etcd/client/v3 (Range and Put, both
// linearizable, over gRPC).
//
// Servers the benchmark starts (Config.Start) are child processes on
// 127.0.0.1 under a temporary directory (internal/localsrv), stopped by
// PID at the end and on interrupt: a 3-node kvorum cluster of this binary,
// redis-server without persistence, redis-server with appendfsync always,
// a 3-member etcd cluster. The caller is cmd/kvorum (bench.go).
package kvbench
