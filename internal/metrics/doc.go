// Package metrics holds what kvorum's packages share for Prometheus.
//
// Each node has one prometheus.Registry: server.Node creates it, every
// component registers its collectors on it (the store, the transport, the
// RESP server, the admin server, the node's own Raft and disk gauges), and
// the admin server exposes it at /metrics. The transport and the RESP
// server register through Register, which returns the identical collector
// already registered instead of failing, so that they can be created again
// on the same registry (as tests do); it panics only on a real conflict
// (another collector under the same name).
package metrics
