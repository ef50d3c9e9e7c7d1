// Package resp serves the Redis protocol (RESP2 and RESP3) for kvorum: a
// streaming command parser, a reply writer, and a server with one goroutine
// per connection that batches pipelined commands and answers
// connection-level commands (PING, HELLO, AUTH, SELECT, QUIT, RESET, CLIENT,
// COMMAND, INFO, TIME) itself. Data commands are validated with kv.Check
// and handed to a Backend in runs: consecutive data commands of one
// pipeline go to the backend in a single Backend.Do call, which is how a
// pipeline becomes one Raft entry.
//
// # Why our own codec
//
// We evaluated github.com/tidwall/redcon v1.6.4 and chose not to use it:
//
//   - it has no limit on bulk length or argument count: a client sending
//     "$1000000000" makes it buffer a gigabyte;
//   - it rescans the whole input buffer from the start on every read, which
//     is quadratic for large frames arriving in small reads;
//   - it writes only RESP2, and kvorum needs RESP3 (HELLO 3: maps, doubles,
//     booleans, verbatim strings, push frames);
//   - kvorum needs per-frame limits refused with clear errors, and control
//     over how much of a pipeline is executed as one batch.
//
// The codec here is small, fuzzed (FuzzParse) and benchmarked
// (BenchmarkParse, BenchmarkServerPipeline).
//
// # Parsing
//
// Reader reads RESP multibulk frames and inline commands (split like
// redis-cli's quoting). Limits are checked on each header before the data
// it announces is buffered; argument bytes are copied into an arena as they
// arrive, so memory follows what the client actually sent. Error texts are
// Redis's where Redis has one ("ERR Protocol error: invalid bulk length",
// ...); kvorum's own limits say "command frame too large (N bytes, limit M)"
// and "too many arguments (N, limit M)". As in Redis, a protocol error is
// answered and the connection closed. One deliberate difference: Redis
// skips the two bytes after bulk data unchecked; kvorum requires CRLF.
//
// # Pipelining
//
// A connection goroutine blocks for one command, then takes every further
// command that is already completely buffered (up to
// Config.PipelineMaxCommands commands or Config.PipelineMaxBytes of
// argument data), executes the batch, writes all replies into one buffer and
// flushes once. A connection command in the middle of a pipeline splits the
// run of data commands around it; replies always keep the command order.
package resp
