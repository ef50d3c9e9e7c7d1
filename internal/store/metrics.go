package store

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the store's Prometheus instruments.
type Metrics struct {
	Proposals       prometheus.Counter
	ProposalLatency prometheus.Histogram
	ReadIndexRounds prometheus.Counter
	// LeaseReads counts reads a leader served from its lease, without a
	// ReadIndex round; LeaseProbes the ReadIndex requests sent only to
	// renew the lease (those sent for reads count in ReadIndexRounds).
	LeaseReads  prometheus.Counter
	LeaseProbes prometheus.Counter
	// ReadBarrierDuration is how long a batch of reads that needed a
	// ReadIndex round waited, from its first read to its release;
	// ReadIndexDuration the round itself (request sent to ReadState) and
	// ReadApplyWait the wait after it for this replica to apply up to
	// the read index.
	ReadBarrierDuration prometheus.Histogram
	ReadIndexDuration   prometheus.Histogram
	ReadApplyWait       prometheus.Histogram
	ReadyRounds         prometheus.Counter
	ReadyDuration       prometheus.Histogram
	FsyncDuration       prometheus.Histogram
	EntriesApplied      prometheus.Counter
	SnapshotsSent       prometheus.Counter
	SnapshotsRecv       prometheus.Counter
	// UnknownRangeMessages counts the Raft messages dropped because they
	// name a range this node has no replica of (Store.Step).
	UnknownRangeMessages prometheus.Counter
	// RangesQuiesced and RangesAwake count the replicas that do and do
	// not tick (replica_quiesce.go), as of the last tick; SweepMarks the
	// replicas the scheduler's safety sweep found with work nothing had
	// marked (store_scheduler.go: should stay 0).
	RangesQuiesced prometheus.Gauge
	RangesAwake    prometheus.Gauge
	SweepMarks     prometheus.Counter
}

// NewMetrics creates the instruments and registers them on reg (if non-nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	lat := prometheus.ExponentialBuckets(0.00005, 2, 18)
	m := &Metrics{
		Proposals:           prometheus.NewCounter(prometheus.CounterOpts{Name: "kvorum_raft_proposals_total", Help: "Raft proposals made by this node."}),
		ProposalLatency:     prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kvorum_raft_proposal_duration_seconds", Help: "Time from proposal to apply on the proposing node.", Buckets: lat}),
		ReadIndexRounds:     prometheus.NewCounter(prometheus.CounterOpts{Name: "kvorum_raft_read_index_rounds_total", Help: "ReadIndex requests issued (each serves a batch of reads)."}),
		LeaseReads:          prometheus.NewCounter(prometheus.CounterOpts{Name: "kvorum_raft_lease_reads_total", Help: "Reads the leader served from its lease, without a ReadIndex round."}),
		LeaseProbes:         prometheus.NewCounter(prometheus.CounterOpts{Name: "kvorum_raft_lease_probes_total", Help: "ReadIndex requests sent only to renew the leader's lease."}),
		ReadBarrierDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kvorum_raft_read_barrier_duration_seconds", Help: "Time a batch of reads waited for its read point through a ReadIndex round: from its first read to its release.", Buckets: lat}),
		ReadIndexDuration:   prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kvorum_raft_read_index_duration_seconds", Help: "Time from sending a ReadIndex request to its answer.", Buckets: lat}),
		ReadApplyWait:       prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kvorum_raft_read_apply_wait_seconds", Help: "Time a batch of reads waited, after its ReadIndex answer, for this node to apply up to the read index.", Buckets: lat}),
		ReadyRounds:         prometheus.NewCounter(prometheus.CounterOpts{Name: "kvorum_raft_ready_rounds_total", Help: "Rounds of Ready handling (one storage batch each)."}),
		ReadyDuration:       prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kvorum_raft_ready_duration_seconds", Help: "Time to handle one round of Ready: persist, send, apply, advance.", Buckets: lat}),
		FsyncDuration:       prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kvorum_storage_fsync_duration_seconds", Help: "Time to commit one synced batch.", Buckets: lat}),
		EntriesApplied:      prometheus.NewCounter(prometheus.CounterOpts{Name: "kvorum_raft_entries_applied_total", Help: "Committed entries applied."}),
		SnapshotsSent:       prometheus.NewCounter(prometheus.CounterOpts{Name: "kvorum_raft_snapshots_sent_total", Help: "Snapshots streamed to followers."}),
		SnapshotsRecv:       prometheus.NewCounter(prometheus.CounterOpts{Name: "kvorum_raft_snapshots_applied_total", Help: "Snapshots received and applied."}),
		UnknownRangeMessages: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvorum_raft_unknown_range_messages_total",
			Help: "Raft messages from peers dropped because this node has no replica of their range."}),
		RangesQuiesced: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kvorum_raft_ranges_quiesced", Help: "Replicas on this node that are quiesced (do not tick)."}),
		RangesAwake:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "kvorum_raft_ranges_awake", Help: "Replicas on this node that tick."}),
		SweepMarks: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvorum_raft_scheduler_sweep_marks_total",
			Help: "Replicas the scheduler's periodic sweep found with work that nothing had marked (a missed mark; should stay 0)."}),
	}
	if reg != nil {
		reg.MustRegister(m.Proposals, m.ProposalLatency, m.ReadIndexRounds, m.LeaseReads, m.LeaseProbes, m.ReadyRounds,
			m.ReadBarrierDuration, m.ReadIndexDuration, m.ReadApplyWait,
			m.ReadyDuration, m.FsyncDuration, m.EntriesApplied, m.SnapshotsSent, m.SnapshotsRecv, m.UnknownRangeMessages,
			m.RangesQuiesced, m.RangesAwake, m.SweepMarks)
	}
	return m
}

// raftLogger adapts slog to raft.Logger; raft's info chatter goes to debug.
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) Debug(v ...interface{}) { r.l.Debug(fmt.Sprint(v...), "component", "raft") }
func (r raftLogger) Debugf(format string, v ...interface{}) {
	r.l.Debug(fmt.Sprintf(format, v...), "component", "raft")
}
func (r raftLogger) Error(v ...interface{}) { r.l.Error(fmt.Sprint(v...), "component", "raft") }
func (r raftLogger) Errorf(format string, v ...interface{}) {
	r.l.Error(fmt.Sprintf(format, v...), "component", "raft")
}
func (r raftLogger) Info(v ...interface{}) { r.l.Debug(fmt.Sprint(v...), "component", "raft") }
func (r raftLogger) Infof(format string, v ...interface{}) {
	r.l.Debug(fmt.Sprintf(format, v...), "component", "raft")
}
func (r raftLogger) Warning(v ...interface{}) { r.l.Warn(fmt.Sprint(v...), "component", "raft") }
func (r raftLogger) Warningf(format string, v ...interface{}) {
	r.l.Warn(fmt.Sprintf(format, v...), "component", "raft")
}
func (r raftLogger) Fatal(v ...interface{}) {
	r.l.Error(fmt.Sprint(v...), "component", "raft")
	panic(fmt.Sprint(v...))
}
func (r raftLogger) Fatalf(format string, v ...interface{}) {
	msg := fmt.Sprintf(format, v...)
	r.l.Error(msg, "component", "raft")
	panic(msg)
}
func (r raftLogger) Panic(v ...interface{}) { panic(fmt.Sprint(v...)) }
func (r raftLogger) Panicf(format string, v ...interface{}) {
	panic(fmt.Sprintf(format, v...))
}
