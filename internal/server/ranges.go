package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvorum/kvorum/internal/admin"
	"github.com/kvorum/kvorum/internal/kv"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/storage"
	"github.com/kvorum/kvorum/internal/store"
)

// Ranges reports every replica this node holds, by range id (GET
// /v1/ranges, `kvorum ctl range list`).
func (n *Node) Ranges() admin.RangesResponse {
	reps := n.store.Replicas()
	slices.SortFunc(reps, func(a, b *store.Replica) int { return cmp.Compare(a.RangeID(), b.RangeID()) })
	out := admin.RangesResponse{NodeID: uint64(n.id), Ranges: make([]admin.Range, 0, len(reps))}
	now := time.Now()
	for _, r := range reps {
		st := r.Status()
		rg := admin.Range{
			RangeID: uint64(st.RangeID), Role: st.Role, Term: st.Term, Leader: st.Leader,
			CommitIndex: st.Commit, AppliedIndex: st.Applied, Replicas: members(st),
		}
		// Load (ranges_load.go).
		rg.ReadsTotal, rg.WritesTotal = r.Load().Totals()
		rg.ReadsPerSec, rg.WritesPerSec = n.load.rate(r, now)
		if st.Descriptor != nil {
			rg.Generation = st.Descriptor.Generation
			rg.StartSlot, rg.EndSlot = uint32(st.Descriptor.StartSlot), uint32(st.Descriptor.EndSlot)
			start, end := n.machine.Span(st.Descriptor)
			if b, err := n.db.EstimateDiskUsage(start, end); err == nil {
				rg.ApproximateBytes = b
			}
		}
		out.Ranges = append(out.Ranges, rg)
	}
	_, out.HoleSlots = n.holeSlots()
	return out
}

// rangeCounts is how many ranges this node holds a replica of and how
// many of them it leads (INFO, /v1/status): no disk estimate, unlike
// Ranges.
func (n *Node) rangeCounts() (held, leading int) {
	for _, r := range n.store.Replicas() {
		held++
		if _, local := r.Leader(); local {
			leading++
		}
	}
	return held, leading
}

// members lists a range's voters and learners as its replica's status
// has them, with the leader's view of their log when it leads.
func members(st store.Status) []admin.Member {
	if st.Descriptor == nil {
		return nil
	}
	out := make([]admin.Member, 0, len(st.Descriptor.Replicas))
	for _, rep := range st.Descriptor.Replicas {
		m := admin.Member{ID: uint64(rep.NodeID), PeerAddr: rep.PeerAddr, Learner: rep.Learner}
		if pr, ok := st.Progress[uint64(rep.NodeID)]; ok {
			m.Match = pr.Match
		}
		out = append(out, m)
	}
	return out
}

// rangeCollector exports each local replica's state as gauges labelled
// with its range, and its load as counters, read at scrape time
// (kvorum_range_*).
type rangeCollector struct {
	n                                         *Node
	leader, leader2, applied, replicas, bytes *prometheus.Desc
	reads, writes                             *prometheus.Desc
	holes                                     *prometheus.Desc
}

func newRangeCollector(n *Node) *rangeCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{"range"}, nil)
	}
	return &rangeCollector{n: n,
		leader:   d("kvorum_range_is_leader", "1 if this node's replica leads the range."),
		leader2:  d("kvorum_range_leader", "Node id of the range's known leader (0 = none)."),
		applied:  d("kvorum_range_applied_index", "Last applied index of this node's replica of the range."),
		replicas: d("kvorum_range_replicas", "Voters and learners of the range."),
		bytes:    d("kvorum_range_approximate_bytes", "Pebble's estimate of the range's data on this node's disk."),
		reads:    d("kvorum_range_reads_total", "Client read commands this node executed for the range (served here or forwarded; each command once)."),
		writes:   d("kvorum_range_writes_total", "Client write commands this node executed for the range (proposed here or forwarded to its leader; each command once)."),
		holes: prometheus.NewDesc("kvorum_range_hole_slots",
			"Hash slots no local replica owns (a split learned by snapshot, until the new range's replica exists; rangesRepairLoop).", nil, nil),
	}
}

func (c *rangeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.leader, c.leader2, c.applied, c.replicas, c.bytes, c.reads, c.writes, c.holes} {
		ch <- d
	}
}

func (c *rangeCollector) Collect(ch chan<- prometheus.Metric) {
	rr := c.n.Ranges()
	ch <- prometheus.MustNewConstMetric(c.holes, prometheus.GaugeValue, float64(rr.HoleSlots))
	for _, r := range rr.Ranges {
		id := strconv.FormatUint(r.RangeID, 10)
		g := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, id)
		}
		lead := 0.0
		if r.Role == "leader" {
			lead = 1
		}
		g(c.leader, lead)
		g(c.leader2, float64(r.Leader))
		g(c.applied, float64(r.AppliedIndex))
		g(c.replicas, float64(len(r.Replicas)))
		g(c.bytes, float64(r.ApproximateBytes))
		ch <- prometheus.MustNewConstMetric(c.reads, prometheus.CounterValue, float64(r.ReadsTotal), id)
		ch <- prometheus.MustNewConstMetric(c.writes, prometheus.CounterValue, float64(r.WritesTotal), id)
	}
}

// methodSplit forwards a split to the leader of the range (splitCall).
const methodSplit = "range-split"

// splitRequest is methodSplit's payload.
type splitRequest struct {
	Range uint64 `json:"range"`
	Slot  uint16 `json:"slot"`
	RHS   uint64 `json:"rhs"`
	Gen   uint64 `json:"gen"`
}

// splitResult is methodSplit's reply: the two new descriptors.
type splitResult struct {
	LHS *storage.Descriptor `json:"lhs"`
	RHS *storage.Descriptor `json:"rhs"`
}

// rangeError is an admin error with its own HTTP status.
type rangeError struct {
	code int
	err  error
}

func (e *rangeError) Error() string   { return e.err.Error() }
func (e *rangeError) Unwrap() error   { return e.err }
func (e *rangeError) HTTPStatus() int { return e.code }

// SplitRange splits range rangeID at slot sl (docs/ranges.md §3.5): the
// range keeps [StartSlot, sl), a new range [sl, EndSlot) with the same
// replicas. The new range's id comes from KVORUM.NEXTRANGEID, a write to
// range 1; the split itself is proposed on the range's leader (forwarded
// if that is another node). A stale generation (the range changed since
// this node read its descriptor) is retried once after catching up.
func (n *Node) SplitRange(ctx context.Context, rangeID storage.RangeID, sl uint16) (lhs, rhs *storage.Descriptor, err error) {
	r := n.store.Replica(rangeID)
	if r == nil {
		return nil, nil, &rangeError{http.StatusNotFound, fmt.Errorf("no range %d on node %d (kvorum ctl range list)", rangeID, n.id)}
	}
	// A split writes (it copies range-local state and creates a range):
	// refused up front while this node's disk is nearly full, as its
	// clients' writes are (disk.go), before a range id is allocated. The
	// leader of the range refuses it too while its own disk is (the
	// store's WriteGate, Replica.Split).
	if e := n.diskRefusal(); e != nil {
		return nil, nil, &rangeError{http.StatusInsufficientStorage, errors.New(string(e.Str))}
	}
	var floor storage.RangeID
	for _, rep := range n.store.Replicas() {
		floor = max(floor, rep.RangeID())
	}
	var rhsID storage.RangeID
	for attempt := 0; ; attempt++ {
		desc := r.Descriptor()
		if !(desc.StartSlot < sl && sl < desc.EndSlot) {
			return nil, nil, &rangeError{http.StatusBadRequest, fmt.Errorf("%w: slot %d, range %d owns slots [%d, %d)", store.ErrSplitSlotOutside, sl, rangeID, desc.StartSlot, desc.EndSlot)}
		}
		if rhsID == 0 {
			// Only once the request looks valid: ids are not reused.
			if rhsID, err = n.nextRangeID(ctx, floor); err != nil {
				return nil, nil, err
			}
		}
		res, err := n.splitOnLeader(ctx, r, splitRequest{Range: uint64(rangeID), Slot: sl, RHS: uint64(rhsID), Gen: desc.Generation})
		switch {
		case err == nil:
			// The answer may come from the leader: let this node's own
			// replicas catch up, so what it reports next shows the split.
			n.catchUp(ctx, rangeID)
			return res.LHS, res.RHS, nil
		case errors.Is(err, store.ErrSplitStaleGeneration) && attempt == 0:
			n.catchUp(ctx, rangeID)
			continue
		case errors.Is(err, store.ErrSplitStaleGeneration):
			return nil, nil, &rangeError{http.StatusConflict, err}
		case errors.Is(err, store.ErrSplitSlotOutside):
			return nil, nil, &rangeError{http.StatusBadRequest, err}
		case isDiskFull(err):
			return nil, nil, &rangeError{http.StatusInsufficientStorage, err}
		}
		return nil, nil, err
	}
}

// isDiskFull reports whether err is a refusal of the disk-full write gate
// (diskRefusal), here or on the node that refused it (the peer wire
// carries store.ErrWriteRefused).
func isDiskFull(err error) bool { return errors.Is(err, store.ErrWriteRefused) }

// nextRangeID allocates a range id greater than floor with
// KVORUM.NEXTRANGEID on range 1.
func (n *Node) nextRangeID(ctx context.Context, floor storage.RangeID) (storage.RangeID, error) {
	r1 := n.store.Replica(firstRange)
	if r1 == nil {
		return 0, fmt.Errorf("%w: no replica of range 1 on node %d", admin.ErrInvalid, n.id)
	}
	out := make([]reply.Reply, 1)
	n.execWriteOn(ctx, r1, [][][]byte{kv.NextRangeIDCommand(uint64(floor))}, out)
	if out[0].Kind == reply.KindError {
		err := fmt.Errorf("allocate a range id on range 1: %s", out[0].Str)
		// The gate of range 1's leader refused the write: its error reply
		// (disk.go's diskRefusal) is the client protocol's, not a Go error.
		if strings.HasPrefix(string(out[0].Str), diskFullPrefix) {
			return 0, &rangeError{http.StatusInsufficientStorage, err}
		}
		return 0, err
	}
	if out[0].Kind != reply.KindInt || out[0].Int <= int64(floor) {
		return 0, fmt.Errorf("allocate a range id: unexpected reply %q (kind %v)", out[0].Str, out[0].Kind)
	}
	return storage.RangeID(out[0].Int), nil
}

// splitOnLeader runs the split on the leader of r's range: here, or
// forwarded (methodSplit), waiting for a leader for up to ctx.
func (n *Node) splitOnLeader(ctx context.Context, r *store.Replica, req splitRequest) (*splitResult, error) {
	payload, _ := json.Marshal(req)
	for {
		lead, isLocal := r.Leader()
		var res *splitResult
		var err error
		switch {
		case isLocal:
			res, err = splitLocal(ctx, r, req)
		case lead != 0:
			var b []byte
			b, err = n.trans.Call(ctx, lead, methodSplit, payload)
			if err = callError(err); err == nil {
				res = &splitResult{}
				err = json.Unmarshal(b, res)
			}
		default:
			err = store.ErrNoLeader
		}
		var nle *store.NotLeaderError
		if err == nil || !(errors.As(err, &nle) || errors.Is(err, store.ErrNoLeader) || errors.Is(err, store.ErrProposalDropped)) {
			return res, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %v", admin.ErrNoLeader, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func splitLocal(ctx context.Context, r *store.Replica, req splitRequest) (*splitResult, error) {
	l, rd, err := r.Split(ctx, req.Slot, storage.RangeID(req.RHS), req.Gen)
	if err != nil {
		return nil, err
	}
	return &splitResult{LHS: l, RHS: rd}, nil
}

// splitCall serves methodSplit on the range's leader.
func (n *Node) splitCall(ctx context.Context, payload []byte) ([]byte, error) {
	var req splitRequest
	if err := json.Unmarshal(payload, &req); err != nil {
		return nil, err
	}
	r := n.store.Replica(storage.RangeID(req.Range))
	if r == nil {
		return nil, wireErr(&store.NotLeaderError{Range: storage.RangeID(req.Range)})
	}
	ctx, cancel := n.withRequestTimeout(ctx)
	defer cancel()
	res, err := splitLocal(ctx, r, req)
	if err != nil {
		return nil, wireErr(err)
	}
	return json.Marshal(res)
}

// SplitRange is the admin API's split (POST /v1/ranges/{id}/split).
func (a *adminAPI) SplitRange(ctx context.Context, rangeID uint64, sl uint16) (admin.SplitRangeResponse, error) {
	l, r, err := (*Node)(a).SplitRange(ctx, storage.RangeID(rangeID), sl)
	if err != nil {
		return admin.SplitRangeResponse{}, err
	}
	return admin.SplitRangeResponse{Left: adminDesc(l), Right: adminDesc(r)}, nil
}

func adminDesc(d *storage.Descriptor) admin.RangeDescriptor {
	out := admin.RangeDescriptor{RangeID: uint64(d.RangeID), StartSlot: uint32(d.StartSlot), EndSlot: uint32(d.EndSlot), Generation: d.Generation, Replicas: []admin.Member{}}
	for _, rep := range d.Replicas {
		out.Replicas = append(out.Replicas, admin.Member{ID: uint64(rep.NodeID), PeerAddr: rep.PeerAddr, Learner: rep.Learner})
	}
	return out
}

// TransferRangeLeader moves range rangeID's leadership to node id and
// waits until it holds, as this node sees it (`kvorum ctl range
// transfer-leader`): the other ranges keep their leaders. An unknown range
// is a 404; a node that is not a voter of the range (not a replica, or a
// learner) a 400.
func (n *Node) TransferRangeLeader(ctx context.Context, rangeID storage.RangeID, id uint64) (leader, term uint64, err error) {
	r := n.store.Replica(rangeID)
	if r == nil {
		return 0, 0, &rangeError{http.StatusNotFound, fmt.Errorf("no range %d on node %d (kvorum ctl range list)", rangeID, n.id)}
	}
	desc := r.Descriptor()
	if rep, ok := desc.Replica(storage.NodeID(id)); !ok || rep.Learner {
		var voters []string
		for _, v := range desc.Replicas {
			if !v.Learner {
				voters = append(voters, strconv.FormatUint(uint64(v.NodeID), 10))
			}
		}
		what := "not a replica"
		if ok {
			what = "a learner"
		}
		return 0, 0, &rangeError{http.StatusBadRequest, fmt.Errorf("node %d is %s of range %d and cannot lead it (its voters: %s)", id, what, rangeID, strings.Join(voters, ", "))}
	}
	if err := n.transferLeaderOf(ctx, rangeID, id); err != nil {
		if errors.Is(err, admin.ErrUnknownMember) {
			// The leader's descriptor has it removed already.
			return 0, 0, &rangeError{http.StatusBadRequest, err}
		}
		return 0, 0, err
	}
	// The old leader saw the new one; wait until this node does too, so
	// that what it reports next shows the transfer.
	for {
		st := r.Status()
		if st.Leader == id {
			return id, st.Term, nil
		}
		select {
		case <-ctx.Done():
			return 0, 0, fmt.Errorf("%w: range %d's leadership moved to node %d, but node %d has not seen it: %v", admin.ErrNoLeader, rangeID, id, n.id, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TransferRangeLeader is the admin API's (POST
// /v1/ranges/{id}/transfer-leader).
func (a *adminAPI) TransferRangeLeader(ctx context.Context, rangeID, node uint64) (admin.TransferRangeLeaderResponse, error) {
	lead, term, err := (*Node)(a).TransferRangeLeader(ctx, storage.RangeID(rangeID), node)
	if err != nil {
		return admin.TransferRangeLeaderResponse{}, err
	}
	return admin.TransferRangeLeaderResponse{RangeID: rangeID, Leader: lead, Term: term}, nil
}
