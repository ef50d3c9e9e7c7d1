package resp

import (
	kvmetrics "github.com/kvorum/kvorum/internal/metrics"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the RESP server's Prometheus instruments. Per-command series
// exist only for commands in the table (connection commands and
// Config.Commands), so a client cannot create series by sending junk names.
type metrics struct {
	cmds      *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	clients   prometheus.Gauge
	conns     prometheus.Counter
	rejected  prometheus.Counter
	protoErrs prometheus.Counter
	tlsFails  prometheus.Counter
	batch     prometheus.Histogram
	published prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		cmds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvorum_resp_commands_total",
			Help: "Commands received from clients, by command (rejected ones included).",
		}, []string{"command"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kvorum_resp_command_duration_seconds",
			Help:    "Time to execute a command; data commands batched from one pipeline share the batch's time.",
			Buckets: prometheus.ExponentialBuckets(0.00001, 2, 22),
		}, []string{"command"}),
		clients: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kvorum_resp_connected_clients",
			Help: "Client connections currently open.",
		}),
		conns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvorum_resp_connections_total",
			Help: "Client connections accepted (including rejected ones).",
		}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvorum_resp_rejected_connections_total",
			Help: "Client connections refused because max clients was reached.",
		}),
		protoErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvorum_resp_protocol_errors_total",
			Help: "Connections closed because of a protocol error or an over-limit frame.",
		}),
		tlsFails: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvorum_resp_tls_handshake_failures_total",
			Help: "Connections to the TLS client port closed because their TLS handshake failed (plain-text client, missing or untrusted client certificate, timeout).",
		}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kvorum_resp_pipeline_commands",
			Help:    "Commands executed per read of a connection (pipeline batch size).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
		}),
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvorum_resp_pubsub_messages_applied_total",
			Help: "PUBLISHed messages this node applied and delivered to its local subscribers.",
		}),
	}
	if reg != nil {
		m.published = kvmetrics.Register(reg, m.published)
		m.cmds = kvmetrics.Register(reg, m.cmds)
		m.latency = kvmetrics.Register(reg, m.latency)
		m.clients = kvmetrics.Register(reg, m.clients)
		m.conns = kvmetrics.Register(reg, m.conns)
		m.rejected = kvmetrics.Register(reg, m.rejected)
		m.protoErrs = kvmetrics.Register(reg, m.protoErrs)
		m.tlsFails = kvmetrics.Register(reg, m.tlsFails)
		m.batch = kvmetrics.Register(reg, m.batch)
	}
	return m
}
