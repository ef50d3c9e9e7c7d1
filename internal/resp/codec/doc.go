// Package codec is kvorum's RESP wire codec: a streaming parser of client
// commands (Reader: RESP multibulk frames and inline commands) and the
// primitives that append RESP frames to a buffer (AppendHeader,
// AppendBulk, AppendSimple, AppendDouble, AppendCommand). It depends on
// nothing but the standard library; package resp maps replies onto these
// frames and runs the connections. SplitArgs, the splitting of inline
// commands (Redis's sdssplitargs), also splits the first line of a
// function library (package script).
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
// (BenchmarkParse here, BenchmarkServerPipeline in resp).
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
package codec
