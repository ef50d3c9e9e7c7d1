// Package process tests kvorum as users run it: the kvorum binary, built
// once by TestMain (go build ../../cmd/kvorum), started as separate
// processes, one per node, each on its own loopback address (127.0.0.1,
// 127.0.0.2, ...; ports from internal/testport), and driven through real
// clients over the Redis protocol and the admin HTTP API. The package has
// no code of its own besides its tests: `go test ./tests/process`.
//
// The helpers of process_test.go start a cluster (newCluster: every node
// with the same --initial-cluster), signal a node (kill -9, SIGTERM) and
// start it again, wait for a leader through /v1/status, and dump the
// nodes' logs when a test fails. The suites:
//
//   - process_test.go: durability under kill -9 of the leader during
//     writes followed by a restart of every node; a SIGTERM'd leader hands
//     its leadership over.
//   - recoverkv_test.go: the correctness categories of the RecoverKV report
//     (API structure, batched updates, durability, availability and
//     recovery, consistency, client permissions), with go-redis set to
//     never resend a write, so that every outcome is the server's.
//     Partitions are tested in internal/server instead, where the
//     transport's Partitioner cuts real links.
//   - clients_test.go: client smoke suites (go-redis v9, and redis-py
//     through testdata/redis_py_smoke.py) over every family of commands,
//     plus failover; the same families run against a plain redis-server
//     to prove that what they expect is what Redis answers.
//   - lock_test.go with its helpers in lockhist_test.go: leases and locks
//     against 3-node clusters: a killed or paused holder process (the
//     test binary re-executed as a client), kill -9 of the leader during a
//     contended run with the grant history checked, a minority node that
//     must not grant, a lagging follower.
//   - peertls_test.go: nodes started with the peer TLS flags replicate
//     over mutual TLS, a node without them cannot join, a certificate
//     rewritten under running nodes is served on new connections.
//   - badactor_test.go: issue 16's bad-input and bad-actor suite: a
//     3-node cluster with client TLS requiring certificates, peer
//     mutual TLS and an admin token over HTTPS; a table of attacks
//     (plain text on the TLS port, missing, foreign, expired or
//     server-only certificates, TLS 1.1, peers joining or injecting
//     Raft streams without the cluster's CA, admin calls without the
//     token, malformed and oversized RESP frames; with --aclfile: wrong
//     passwords, unknown users, commands before AUTH, every family's
//     key commands for users without the category or the key pattern,
//     scripts, pub/sub and locks outside the user's keys and channels),
//     each refused with its error, counted or in the ACL LOG, with every
//     node's data, the membership and the users compared before and
//     after. acl_clients_test.go: redis-cli, go-redis and redis-py as
//     an ACL user with a password over client-certificate TLS.
//
// For faults inside one process see internal/torture; for long randomized
// runs of real processes under faults, internal/chaos (`kvorum chaos`).
package process
