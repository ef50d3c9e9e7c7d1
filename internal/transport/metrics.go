package transport

import (
	kvmetrics "github.com/kvorum/kvorum/internal/metrics"
	"github.com/kvorum/kvorum/internal/storage"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/raft/v3/raftpb"
)

// Reasons a message is dropped (label "reason").
const (
	dropQueueFull   = "queue_full"   // the peer's queue was full
	dropUnknownPeer = "unknown_peer" // Send to an id without SetPeer
	dropSendFailed  = "send_failed"  // the stream broke / the peer is down
	dropInterceptor = "interceptor"  // the Interceptor said so
	dropNoRange     = "no_range"     // Send of a message without its range (a bug)
)

// Stats are cumulative counters, for tests and debugging.
type Stats struct {
	FramesSent       uint64 // raft batch frames written to streams
	MessagesSent     uint64
	MessagesReceived uint64
	MessagesDropped  uint64 // for any reason
	SnapshotsSent    uint64 // successfully
	SnapshotsFailed  uint64
	CallFramesSent   uint64 // request frames written to call streams
	CallsSent        uint64 // pipelined calls written to call streams
}

type stats struct {
	framesSent, msgsSent, msgsRecv, msgsDropped, snapsSent, snapsFailed, callFramesSent, callsSent atomic.Uint64
}

func (s *stats) get() Stats {
	return Stats{
		FramesSent:       s.framesSent.Load(),
		MessagesSent:     s.msgsSent.Load(),
		MessagesReceived: s.msgsRecv.Load(),
		MessagesDropped:  s.msgsDropped.Load(),
		SnapshotsSent:    s.snapsSent.Load(),
		SnapshotsFailed:  s.snapsFailed.Load(),
		CallFramesSent:   s.callFramesSent.Load(),
		CallsSent:        s.callsSent.Load(),
	}
}

type metrics struct {
	stats
	sent      *prometheus.CounterVec // type
	received  *prometheus.CounterVec // type
	dropped   *prometheus.CounterVec // type, reason
	frames    prometheus.Counter
	bytesSent prometheus.Counter
	bytesRecv prometheus.Counter
	snapshots *prometheus.CounterVec   // direction, result
	snapBytes *prometheus.CounterVec   // direction
	callDur   *prometheus.HistogramVec // method, result
	// Pipelined calls: requests per frame is callsPipelined / callFrames.
	callFrames     prometheus.Counter
	callsPipelined prometheus.Counter
	// foreignStreams counts streams and calls refused because the sender
	// belongs to another cluster.
	foreignStreams prometheus.Counter
	// tlsRefused counts peer connections refused by peer TLS, by reason.
	tlsRefused *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvorum_transport_messages_sent_total", Help: "Raft messages written to peer streams, by type.",
		}, []string{"type"}),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvorum_transport_messages_received_total", Help: "Raft messages received from peers, by type.",
		}, []string{"type"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvorum_transport_messages_dropped_total", Help: "Outgoing Raft messages dropped, by type and reason.",
		}, []string{"type", "reason"}),
		frames: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvorum_transport_frames_sent_total", Help: "Batches of Raft messages written to peer streams.",
		}),
		bytesSent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvorum_transport_sent_bytes_total", Help: "Bytes of Raft batch frames sent.",
		}),
		bytesRecv: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvorum_transport_received_bytes_total", Help: "Bytes of Raft batch frames received.",
		}),
		snapshots: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvorum_transport_snapshots_total", Help: "Snapshot transfers, by direction (sent/received) and result (ok/failed).",
		}, []string{"direction", "result"}),
		snapBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvorum_transport_snapshot_bytes_total", Help: "Snapshot data bytes streamed, by direction.",
		}, []string{"direction"}),
		callDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kvorum_transport_call_duration_seconds", Help: "Latency of outgoing peer calls, by method and result.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 17),
		}, []string{"method", "result"}),
		callFrames: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvorum_transport_call_frames_sent_total", Help: "Request frames written to peer call streams (pipelined calls).",
		}),
		callsPipelined: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvorum_transport_pipelined_calls_sent_total", Help: "Pipelined calls written to peer call streams.",
		}),
		foreignStreams: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvorum_transport_foreign_streams_refused_total", Help: "Peer streams, snapshots and calls refused because the sender belongs to another cluster.",
		}),
		tlsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvorum_transport_tls_refused_total", Help: "Accepted peer connections refused by peer TLS, by reason: handshake (failed: no certificate, or one of another CA), plaintext (a peer without TLS, on a node with it), tls_unexpected (a peer with TLS, on a node without).",
		}, []string{"reason"}),
	}
	if reg != nil {
		m.sent = kvmetrics.Register(reg, m.sent)
		m.received = kvmetrics.Register(reg, m.received)
		m.dropped = kvmetrics.Register(reg, m.dropped)
		m.frames = kvmetrics.Register(reg, m.frames)
		m.bytesSent = kvmetrics.Register(reg, m.bytesSent)
		m.bytesRecv = kvmetrics.Register(reg, m.bytesRecv)
		m.snapshots = kvmetrics.Register(reg, m.snapshots)
		m.snapBytes = kvmetrics.Register(reg, m.snapBytes)
		m.callDur = kvmetrics.Register(reg, m.callDur)
		m.callFrames = kvmetrics.Register(reg, m.callFrames)
		m.callsPipelined = kvmetrics.Register(reg, m.callsPipelined)
		m.foreignStreams = kvmetrics.Register(reg, m.foreignStreams)
		m.tlsRefused = kvmetrics.Register(reg, m.tlsRefused)
	}
	return m
}

func typeLabel(m *raftpb.Message) string { return m.GetType().String() }

func (m *metrics) drop(msg *raftpb.Message, reason string) {
	m.msgsDropped.Add(1)
	m.dropped.WithLabelValues(typeLabel(msg), reason).Inc()
}

func (m *metrics) dropAll(msgs []storage.RaftMessage, reason string) {
	for _, msg := range msgs {
		m.drop(msg.Msg, reason)
	}
}

func (m *metrics) sentMsgs(msgs []storage.RaftMessage) {
	m.msgsSent.Add(uint64(len(msgs)))
	for _, msg := range msgs {
		m.sent.WithLabelValues(typeLabel(msg.Msg)).Inc()
	}
}

func (m *metrics) receivedMsgs(msgs []storage.RaftMessage) {
	m.msgsRecv.Add(uint64(len(msgs)))
	for _, msg := range msgs {
		m.received.WithLabelValues(typeLabel(msg.Msg)).Inc()
	}
}

func (m *metrics) snapshotDone(direction string, ok bool) {
	result := "ok"
	if !ok {
		result = "failed"
	}
	if direction == "sent" {
		if ok {
			m.snapsSent.Add(1)
		} else {
			m.snapsFailed.Add(1)
		}
	}
	m.snapshots.WithLabelValues(direction, result).Inc()
}
