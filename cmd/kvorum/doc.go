// Command kvorum is a Raft-replicated key-value store that speaks the Redis
// protocol. One binary does everything:
//
//	kvorum start    run one node of a cluster (start.go)
//	kvorum demo     run a local N-node cluster inside this process (demo.go)
//	kvorum ctl      inspect and manage a running cluster through a node's
//	                admin HTTP API: status, member list|add|remove,
//	                transfer-leader (ctl.go)
//	kvorum chaos    run a cluster of real processes under faults and check it
//	                (chaos.go, package chaos)
//	kvorum bench    benchmark distributed locks: kvorum's LOCK commands
//	                against Redlock and ZooKeeper (bench.go, package lockbench)
//	kvorum import   load a Redis RDB file into a running cluster with
//	                pipelined RESTORE ... ABSTTL (import.go, package rdb)
//	kvorum version  print version information (version.go)
//
// `kvorum help COMMAND` and `kvorum COMMAND --help` print a command's
// synopsis, description and flags, grouped (flags.go renders them and
// parses size flags with K, M, G suffixes).
//
// # Running a node
//
// start turns its flags into a server.Config (the flags are the
// configuration reference: see `kvorum start --help` and the README),
// starts a server.Node and waits. On SIGINT or SIGTERM it calls
// Node.Shutdown: a leader first hands its leadership over, then the node
// stops cleanly; a second signal exits at once. A node that stops by
// itself (its storage failed: it will not run on a state it could not
// persist) makes start exit 1 with the failure as its last line; a storage
// failure on one of Pebble's own goroutines, which cannot be unwound,
// exits the process the same way (server.Config.StorageFatal).
//
// # Conventions
//
// Every command returns an error to main, which maps it to the exit
// status: 0 success (help included), 1 the command failed, 2 a bad command
// line (with a pointer to --help). Output meant for programs goes to
// stdout (`ctl --json`, `chaos --json`, `bench --json`), logs and errors
// to stderr. The version is set at link time (-ldflags "-X
// main.version=...") and reported by INFO, HELLO and the admin API.
package main
