// Package kvdiff holds what the differential tests against a real
// redis-server share: the testdata/diff file format (file.go), replies as
// they are on the wire and their rendering in those files (value.go,
// render.go), private redis-servers to record them from (reference.go),
// go-redis reply normalisation, and a random command generator (gen.go).
// It is used only by tests.
//
// A differential test requires kvorum to answer a command exactly as
// redis-server does, in RESP2 and in RESP3. The files
// (internal/kv/testdata/diff/*.txt and internal/server/testdata/diff,
// datadriven files whose format file.go and the README there describe)
// hold sequences of commands, each with redis-server's recorded replies:
//
//   - Recording: Reference runs a file's commands on two private
//     redis-servers, one spoken to in RESP2 and one in RESP3 (Conn, Dial);
//     Reference.CheckFile with datadriven's -rewrite writes their replies
//     into the file as Expected renders them, and without it fails when
//     redis-server no longer gives them. HaveRedis and Rewriting say
//     whether that can and should happen.
//   - Comparing: a test runs the same commands on kvorum, turns each reply
//     into a Value (FromReply from a reply.Reply; ReadValue from the
//     wire), renders it (Render, after Canonical has put the parts whose
//     order Redis leaves open in order) and compares it with the recorded
//     text (ExpectedFor picks one protocol's form). Load reads a file's
//     commands for tests that run them outside datadriven.
//   - Live comparisons with go-redis: StartRedis starts one private
//     redis-server; Normalize and SortUnordered make go-redis replies
//     comparable.
//   - Gen draws random commands from a seed (NewGen, Next); with
//     deterministic set only those whose reply Redis fixes. String renders
//     a command for a failure report.
//   - Moving keys between servers (everytype.go): EveryType builds keys of
//     every type and encoding, Fill runs it, Move copies a key with DUMP
//     and RESTORE ... ABSTTL, and Describe says what commands answer of a
//     key, to compare two servers (internal/server's
//     TestDumpRestoreWithRedis, cmd/kvorum's TestImportRDB).
//
// Callers: internal/kv's tests (TestDifferentialKV: the state machine
// alone, against the recorded replies; per-family and random comparisons
// with a live redis-server) and internal/server's
// (TestDifferentialAgainstRedisThroughCluster: the files through a 3-node
// cluster; TestReplicasConverge: Gen's commands through every node, then
// the replicas' state hashes compared).
package kvdiff
