// Package resp serves the Redis protocol (RESP2 and RESP3) for kvorum: a
// reply writer (AppendReply: a reply.Reply in RESP2 or RESP3 framing) and a
// server with one goroutine per connection that batches pipelined commands
// and answers connection-level commands (PING, HELLO, AUTH, SELECT, QUIT,
// RESET, CLIENT, COMMAND, INFO, TIME) itself. Data commands are validated
// with Config.Commands (kv.Table: resp does not import kv) and handed to a
// Backend in runs: consecutive data commands of one
// pipeline go to the backend in a single Backend.Do call, which is how a
// pipeline becomes one Raft entry.
//
// The wire codec (the command parser and the frame primitives) is package
// resp/codec, which depends on nothing but the standard library.
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
