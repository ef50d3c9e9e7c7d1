// Package admin is a node's admin HTTP server: health and readiness probes,
// Prometheus metrics, and the small JSON API `kvorum ctl` talks to.
//
//	GET    /healthz              200 "ok" while the process runs
//	GET    /readyz               200 when the node can serve linearizable reads, else 503
//	GET    /metrics              Prometheus metrics (the node's registry + Go + process)
//	GET    /v1/status            Status
//	GET    /v1/members           MembersResponse
//	POST   /v1/members           {"id":N,"peer_addr":"host:port"} -> MembersResponse
//	DELETE /v1/members/{id}      MembersResponse
//	POST   /v1/transfer-leader   {"id":N} -> TransferLeaderResponse
//	GET    /v1/ranges            RangesResponse
//	POST   /v1/ranges/{id}/split {"slot":S} -> SplitRangeResponse
//	POST   /v1/ranges/{id}/transfer-leader {"node":N} -> TransferRangeLeaderResponse
//	GET    /debug/pprof/...      Go's profiler (net/http/pprof)
//
// Errors of the /v1 API are JSON: {"error":"..."} (see ErrorResponse).
//
// # Use
//
// New builds a Server from a Config whose Node is the NodeAPI it serves;
// Serve runs it on a listener and Close stops it (in-flight requests are
// cancelled). server.Node creates one at Start unless its AdminAddr is
// "-", with the node's Prometheus registry (Go and process collectors are
// added to it), and passes itself through a thin adapter. `kvorum ctl`
// (cmd/kvorum) is the client: it decodes Status, MembersResponse,
// TransferLeaderResponse and ErrorResponse from here.
//
// # Errors
//
// A NodeAPI method fails with an error; StatusCode turns it into the HTTP
// status by identity (errors.Is/As, never by text): ErrNotLeader 421 (the
// reply names the leader), ErrNoLeader, ErrStopped and a cancelled context
// 503, ErrUnknownMember 404, ErrMemberExists and ErrBusy 409, ErrInvalid
// 400, a context deadline 504, an error implementing HTTPStatuser its own
// code, anything else 500. The node forwards membership changes to the
// leader; the leader's refusal comes back with its identity (package
// server rebuilds typed errors from the peer wire), so a 404 or 409 from
// the leader is a 404 or 409 on every node. Requests are checked before
// they reach the node where the answer is known locally (an id that is
// not positive, an unparsable peer address, a member that does not exist).
//
// # Goroutines
//
// Serve runs net/http's server: one goroutine per connection calls the
// handlers, and through them the NodeAPI, concurrently. Mutating requests
// are bounded by AddMemberTimeout and RequestTimeout.
package admin
