// Package transport carries Raft messages, snapshots and calls between
// kvorum nodes.
//
// Transport serves one peer port. The two streams that carry every write
// are framed TCP connections of their own (stream.go): a preface (magic,
// kind and the sender's cluster id: a node refuses streams from another
// cluster's nodes), the server's answer, then length-prefixed frames, one write
// system call per frame. The rare calls stay on gRPC without generated
// code: the service kvorum.Peer is registered by hand (a grpc.ServiceDesc)
// and every message is an opaque frame passed through by a forced
// pass-through codec ("kvorum-raw"). The accept loop tells the two apart
// by a connection's first bytes. Frame layouts are described in wire.go.
//
//   - Raft stream (framed): one long-lived connection per (sender,
//     receiver) pair; each frame is a batch of proto-marshalled
//     raftpb.Messages, each with the range it belongs to
//     (storage.RaftMessage), with a header naming sender and receiver.
//     The messages of every range to one node share its stream and
//     frames. A receiver closes a stream whose frames are malformed or
//     meant for another node id.
//   - Snapshot, gRPC client-streaming: one stream per MsgSnap: the
//     message and its range, then 1 MiB chunks of the data from the SnapshotSource; the
//     receiver answers after Handler.HandleSnapshot returns (failure as a
//     gRPC status).
//   - Call, gRPC unary: (method, payload) → payload, for joins and
//     membership changes. Payloads are not interpreted; a handler's error
//     comes back as a gRPC status (codes.Unknown with its text unless it
//     is a status or a context error already). A handler error that is a
//     WireError also carries its own encoding (a status detail), which the
//     caller gets back with WireDetail: that is how a typed error crosses
//     from one node to another (package server defines the encoding).
//   - Calls stream (framed, both ways): one long-lived connection per
//     (caller, callee) pair carrying the calls of CallPipelined (forwarded
//     writes): requests queued by concurrent callers go out together in
//     one frame, each with an id and the caller's remaining time; the
//     callee runs each on its own goroutine and sends the responses ready
//     at once in one frame, in any order. Same payloads, statuses (encoded
//     in the response frame) and WireDetail as Call.
//
// With Config.TLS (tls.go) the whole port is mutual TLS: Serve's
// per-connection goroutine completes the TLS handshake before it reads
// the first bytes that tell a framed stream from gRPC, and every
// connection the transport dials (framed streams, gRPC's dialer) does the
// client side of it; the certificates and CA bundle are read from files
// that are re-read when they change. After a handshake it accepts, a
// node writes one byte (tlsAccepted) before anything else, which the
// dialing node waits for: with TLS 1.3 a refusal of the client's
// certificate would otherwise reach it only after it had written (and
// failed with a bare broken pipe). A node with TLS answers a plaintext
// peer's framed stream with a refusal (tlsRequiredAnswer) and its gRPC
// calls with an Unauthenticated status; a node without answers a TLS
// ClientHello with a handshake_failure alert. The dialing side gets an
// error wrapping ErrPeerTLS (and ErrNotSent). The Interceptor sits above
// all this and works the same with or without TLS.
//
// Local implements the same methods in process (LocalNetwork routes by node
// id), with the same asynchrony, copying, bounded queues and Interceptor,
// for cluster tests without sockets. Sender is the interface both satisfy.
//
// # Goroutines
//
// Sending side (Transport and Local alike):
//
//   - Send runs on the caller's goroutine (the Raft loop) and never blocks
//     nor calls back into the Handler: it asks the Interceptor about each
//     message, then appends it to its destination's bounded queue (4096 by
//     default; when full the message is dropped and counted) or, for
//     MsgSnap, starts a snapshot goroutine.
//   - One peer loop goroutine per known peer (started by SetPeer, stopped
//     by RemovePeer or Close) wakes when its queue is non-empty, takes
//     everything queued (holding back messages the Interceptor delayed,
//     without delaying the others) and writes it as one frame (split at
//     ~4 MiB) on the peer's Raft stream, opening the stream first if
//     needed. If that fails, the unsent messages are dropped, the peer is
//     reported unreachable and the loop backs off (100ms doubling to 2s)
//     before trying a fresh connection; gRPC's own reconnection (calls,
//     snapshots) uses the same backoff. In Local the loop calls the
//     destination's HandleRaft itself (with copies of the messages), which
//     is what the receiving stream's goroutine does over TCP.
//   - One goroutine per outgoing MsgSnap streams the message and its data,
//     independently of the Raft stream, and then reports the outcome.
//   - One reporter goroutine per transport calls Handler.ReportUnreachable
//     (coalesced per peer) and Handler.ReportSnapshot, so that feedback
//     never runs on the goroutine that called Send.
//   - (Transport only: Local has no CallPipelined.) One call sender
//     goroutine per known peer (started by SetPeer) writes the pipelined
//     calls queued for it (all at once, in one frame) on the peer's Calls
//     stream, opening it when there is none; one receiver goroutine per
//     open Calls stream hands the responses to the waiting callers.
//   - Call and CallAddr run on the caller's goroutine (Local runs the
//     remote handler on a goroutine of its own, as a server would).
//
// Receiving side (Transport): the accept loop (Serve) starts a goroutine
// per accepted connection, which reads its first bytes and then serves it
// as a framed stream or hands it to gRPC, whose server goroutines run one
// per incoming snapshot stream or call. A stream that opens must be
// answered within the dial timeout, and a frame write that makes no
// progress for 10 s fails its stream (gRPC's keepalive did that before):
// a peer that accepts connections but serves nothing is unreachable, not
// a sink. HandleRaft is called on the stream's goroutine, in order,
// so it runs concurrently for different senders but never for the same
// one; HandleSnapshot reads the data straight off its stream's goroutine;
// HandleCall runs on the call's goroutine with the call's context, or, for
// the Calls stream, on a goroutine per request under the caller's deadline
// (the stream's goroutine reads requests, another writes responses).
//
// Close cancels everything in flight (streams, snapshots, queued messages,
// the handler contexts of incoming calls), closes the listeners and
// accepted connections, stops the gRPC server and waits
// until every goroutine of the transport has exited and no Handler method
// is executing. Handler methods must therefore not call Close.
//
// # Faults
//
// The Interceptor is consulted on the sending side for every raft message
// and call. Partitioner is a ready-made one (cuts, one-way cuts, isolation,
// random drops and delays); a single Partitioner can be shared by all nodes
// of an in-process cluster, since each transport passes its own id.
package transport
