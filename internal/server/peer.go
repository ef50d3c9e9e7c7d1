package server

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/cockroachdb/pebble/v2"
	"github.com/kvorum/kvorum/internal/admin"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/storage"
	"github.com/kvorum/kvorum/internal/store"
	"github.com/kvorum/kvorum/internal/transport"
)

// peerHandler is the Node as the peer transport sees it.
type peerHandler Node

// Peer call methods.
const (
	methodExec           = "exec"
	methodJoin           = "join"
	methodMembers        = "members"
	methodCluster        = "cluster"
	methodRemoveMember   = "member-remove"
	methodTransferLeader = "transfer-leader"
	// methodRanges returns the descriptor of every range the answering
	// node holds (JSON []storage.Descriptor): a joining node creates a
	// replica of each before it asks to join (docs/ranges.md §3.5b).
	methodRanges = "ranges"
)

// HandleRaft steps each message into the range it came with. One for a
// range this node has no replica of is dropped there (counted and logged
// by Store.Step): the stream, shared by every range, goes on.
func (h *peerHandler) HandleRaft(msgs []store.RaftMessage) {
	n := (*Node)(h)
	for _, m := range msgs {
		n.store.StepMessage(m)
	}
}

func (h *peerHandler) HandleSnapshot(m store.RaftMessage, data io.Reader) error {
	return (*Node)(h).store.ReceiveSnapshot(m, data)
}

// ReportUnreachable reaches every range that has a replica on node to:
// the queue and stream to a node serve all of them.
func (h *peerHandler) ReportUnreachable(to uint64) {
	n := (*Node)(h)
	n.store.ReportUnreachable(to)
	if !n.trans.HasPeer(to) {
		n.learnPeers()
	}
}

// learnPeers asks the members this node knows for the current member list
// and adds the addresses it lacks. It runs when raft addresses a peer the
// transport does not know: a node that was down while members were added,
// and whose log no longer holds those changes (a snapshot replaced them),
// hears from the new leader but could not answer it, so it would never get
// the snapshot that tells it the new members. Found by the torture harness
// (crash + membership change). At most one lookup runs at a time, at most
// one every 500 ms.
func (n *Node) learnPeers() {
	now := time.Now().UnixNano()
	last := n.lastPeerLookup.Load()
	if now-last < int64(500*time.Millisecond) || !n.lastPeerLookup.CompareAndSwap(last, now) {
		return
	}
	go func() {
		for _, rep := range n.store.Replica(firstRange).Descriptor().Replicas {
			if rep.NodeID == n.id {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			data, err := n.trans.CallAddr(ctx, rep.PeerAddr, methodMembers, nil)
			cancel()
			var reps []storage.ReplicaDescriptor
			if err != nil || json.Unmarshal(data, &reps) != nil {
				continue
			}
			for _, m := range reps {
				if m.NodeID != n.id && !n.trans.HasPeer(uint64(m.NodeID)) {
					n.cfg.Logger.Info("learned peer address", "peer", uint64(m.NodeID), "addr", m.PeerAddr)
					n.trans.SetPeer(uint64(m.NodeID), m.PeerAddr)
				}
			}
			return
		}
	}()
}

func (h *peerHandler) ReportSnapshot(rangeID storage.RangeID, to uint64, ok bool) {
	(*Node)(h).store.ReportSnapshot(rangeID, to, ok)
}

func (n *Node) openSnapshot(m *raftpb.Message) (io.ReadCloser, error) {
	rc, err := n.store.OpenSnapshot(m.GetSnapshot())
	if err != nil {
		return nil, err
	}
	return rc, nil
}

// Forwarded exec: request = uvarint range, uvarint count, commands (each
// uvarint argc + uvarint-prefixed args). Response = codeOK then the replies,
// or an encoded error (peererr.go).

func encodeCmds(cmds [][][]byte) []byte { return encodeRangeCmds(firstRange, cmds) }

// encodeRangeCmds is encodeCmds for the commands of range rangeID.
func encodeRangeCmds(rangeID storage.RangeID, cmds [][][]byte) []byte {
	b := binary.AppendUvarint(nil, uint64(rangeID))
	b = binary.AppendUvarint(b, uint64(len(cmds)))
	for _, c := range cmds {
		b = binary.AppendUvarint(b, uint64(len(c)))
		for _, a := range c {
			b = binary.AppendUvarint(b, uint64(len(a)))
			b = append(b, a...)
		}
	}
	return b
}

var errBadPayload = errors.New("server: malformed peer payload")

// decodeCmds decodes a forwarded exec request: the range its commands go
// to, and the commands.
func decodeCmds(b []byte) (storage.RangeID, [][][]byte, error) {
	r := wireReader{b: b}
	rangeID := storage.RangeID(r.uvarint())
	nc := r.uvarint()
	if r.err != nil || rangeID == 0 || nc > uint64(len(r.b)) {
		return 0, nil, errBadPayload
	}
	cmds := make([][][]byte, nc)
	for i := range cmds {
		argc := r.uvarint()
		if r.err != nil || argc == 0 || argc > uint64(len(r.b)) {
			return 0, nil, errBadPayload
		}
		cmds[i] = make([][]byte, argc)
		for j := range cmds[i] {
			cmds[i][j] = r.bytes()
		}
		if r.err != nil {
			return 0, nil, errBadPayload
		}
	}
	return rangeID, cmds, nil
}

// forwardExec sends a run of writes to the leader and waits for its
// replies. It goes over the transport's pipelined call stream to the
// leader (CallPipelined): the runs of every client of this node share one
// gRPC stream, several to a frame, rather than one unary RPC each (which
// cost the leader a gRPC stream, headers and a server goroutine per run).
// The error contract is Call's: ErrNotSent means the leader never saw the
// run (retried as ErrNoLeader), anything else after it may have been
// written is ambiguous.
func (n *Node) forwardExec(ctx context.Context, lead uint64, rangeID storage.RangeID, cmds [][][]byte) ([]reply.Reply, error) {
	resp, err := n.trans.CallPipelined(ctx, lead, methodExec, encodeRangeCmds(rangeID, cmds))
	if err != nil {
		switch {
		case errors.Is(err, transport.ErrNotSent):
			// The leader never saw it (e.g. it just died): retry once a
			// leader is known again.
			return nil, store.ErrNoLeader
		case ctx.Err() != nil:
			return nil, store.ErrAmbiguous
		}
		return nil, fmt.Errorf("forward to leader %d: %w (%w)", lead, err, store.ErrAmbiguous)
	}
	if len(resp) == 0 {
		return nil, errBadPayload
	}
	if resp[0] != codeOK {
		remote, ok := decodeError(resp)
		if !ok {
			return nil, errBadPayload
		}
		return nil, remote
	}
	b := resp[1:]
	out := make([]reply.Reply, 0, len(cmds))
	for range cmds {
		var r reply.Reply
		if r, b, err = reply.Decode(b); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (h *peerHandler) HandleCall(ctx context.Context, method string, payload []byte) ([]byte, error) {
	n := (*Node)(h)
	switch method {
	case methodExec:
		rangeID, cmds, err := decodeCmds(payload)
		if err != nil {
			return nil, err
		}
		r := n.store.Replica(rangeID)
		if r == nil {
			// Not proposed: the sender may retry where the range is.
			return appendError(nil, &store.NotLeaderError{Range: rangeID}), nil
		}
		ctx, cancel := n.withRequestTimeout(ctx)
		defer cancel()
		replies, err := r.Propose(ctx, cmds)
		if err != nil {
			return appendError(nil, err), nil
		}
		out := []byte{codeOK}
		for _, r := range replies {
			out = r.AppendBinary(out)
		}
		return out, nil
	case methodJoin:
		var req memberRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, err
		}
		if req.One {
			return nil, wireErr(n.addMemberTo(ctx, req.rangeID(), req.ID, req.PeerAddr))
		}
		return nil, wireErr(n.AddMember(ctx, req.ID, req.PeerAddr))
	case methodMembers:
		return json.Marshal(n.store.Replica(firstRange).Descriptor().Replicas)
	case methodRanges:
		return json.Marshal(n.localDescriptors())
	case methodCluster:
		return binary.BigEndian.AppendUint64(nil, n.clusterID), nil
	case methodRemoveMember:
		var req memberRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, err
		}
		if req.One {
			return nil, wireErr(n.removeMemberFrom(ctx, req.rangeID(), req.ID))
		}
		return nil, wireErr(n.RemoveMember(ctx, req.ID))
	case methodSentinel:
		return json.Marshal(n.selfInfo())
	case methodTransferLeader:
		var req memberRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, err
		}
		if req.One {
			return nil, wireErr(n.transferLeaderOf(ctx, req.rangeID(), req.ID))
		}
		return nil, wireErr(n.TransferLeader(ctx, req.ID))
	case methodSplit:
		return n.splitCall(ctx, payload)
	}
	return nil, fmt.Errorf("unknown peer method %q", method)
}

type memberRequest struct {
	ID       uint64 `json:"id"`
	PeerAddr string `json:"peer_addr,omitempty"`
	// One: the request is about range Range alone (sent by a node that
	// forwards one range's change to that range's leader); else about
	// every range (range 1 alone while there is one), as from a joining
	// node or a node of an older kvorum.
	One   bool   `json:"one,omitempty"`
	Range uint64 `json:"range,omitempty"`
}

// rangeID is the range a request for one range names (range 1 for 0).
func (q memberRequest) rangeID() storage.RangeID {
	if q.Range == 0 {
		return firstRange
	}
	return storage.RangeID(q.Range)
}

// join asks the cluster at cfg.Join to admit this node, retrying until the
// request succeeds or a minute passes.
func (n *Node) join() error {
	payload, _ := json.Marshal(memberRequest{ID: uint64(n.id), PeerAddr: n.AdvertisePeerAddr()})
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		// Learn the members' addresses first: until the snapshot arrives
		// this node must be able to answer the leader.
		members, err := n.trans.CallAddr(ctx, n.cfg.Join, methodMembers, nil)
		if err == nil {
			var reps []storage.ReplicaDescriptor
			if err = json.Unmarshal(members, &reps); err == nil {
				for _, rep := range reps {
					if rep.NodeID != n.id {
						n.trans.SetPeer(uint64(rep.NodeID), rep.PeerAddr)
					}
				}
				n.learnClusterID(ctx)
				if err = n.joinRanges(ctx); err == nil {
					err = n.joinCall(ctx, payload)
				}
			}
		}
		cancel()
		if errors.Is(err, admin.ErrMemberExists) {
			err = nil // admitted before (this node restarted during its join)
		}
		if err == nil {
			n.cfg.Logger.Info("joined cluster", "via", n.cfg.Join)
			return nil
		}
		if errors.Is(err, transport.ErrPeerTLS) {
			// Not a passing failure: retrying cannot help until a
			// certificate or the configuration changes.
			return fmt.Errorf("join via %s refused by peer TLS (every node of a cluster needs --peer-cert-file, --peer-key-file and --peer-trusted-ca-file with certificates of the cluster's CA, or none has them): %w", n.cfg.Join, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("join via %s: %w", n.cfg.Join, err)
		}
		n.cfg.Logger.Warn("join attempt failed; retrying", "via", n.cfg.Join, "err", err)
		select {
		case <-n.stopper:
			return store.ErrStopped
		case <-time.After(time.Second):
		}
	}
}

// joinRangesEvery is how often a joining node lists the ranges of the
// member it joins through again while the join call runs (joinCall).
const joinRangesEvery = 250 * time.Millisecond

// joinCall makes the join call. While it runs, the node lists the
// member's ranges again every joinRangesEvery and creates a replica of
// each new one (joinRanges): a range split off while the member adds this
// node range by range (AddMember, eachRange) has no replica here, so its
// leader's messages would be dropped and the add would wait for a
// catch-up that never comes. The repair loop, which does this for a
// member, does not run before the join is done.
func (n *Node) joinCall(ctx context.Context, payload []byte) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	relist := make(chan struct{})
	go func() {
		defer close(relist)
		t := time.NewTicker(joinRangesEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := n.joinRanges(ctx); err != nil && ctx.Err() == nil {
					n.cfg.Logger.Debug("listing the ranges again during the join", "err", err)
				}
			}
		}
	}()
	_, err := n.trans.CallAddr(ctx, n.cfg.Join, methodJoin, payload)
	cancel()
	<-relist
	return callError(err)
}

// localDescriptors returns the descriptor of every local replica, in
// range id order.
func (n *Node) localDescriptors() []*storage.Descriptor {
	reps := n.store.Replicas()
	out := make([]*storage.Descriptor, 0, len(reps))
	for _, r := range reps {
		out = append(out, r.Descriptor())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].RangeID < out[j].RangeID })
	return out
}

// joinRanges asks the member at cfg.Join for its ranges and creates an
// uninitialized replica (uninitializedDescriptor) of each one this node
// lacks. It runs before the join call: the leaders add this node to range
// 1 first, then to every other range, and each sends a snapshot that only
// a replica of its range can receive (Store.Step and ReceiveSnapshot drop
// what no local replica's range takes). A member of a release without the
// call has one range, which this node already holds.
func (n *Node) joinRanges(ctx context.Context) error {
	b, err := n.trans.CallAddr(ctx, n.cfg.Join, methodRanges, nil)
	if err != nil {
		if strings.Contains(err.Error(), "unknown peer method") {
			return nil
		}
		return callError(err)
	}
	var descs []*storage.Descriptor
	if err := json.Unmarshal(b, &descs); err != nil {
		return fmt.Errorf("ranges of %s: %w", n.cfg.Join, err)
	}
	for _, d := range descs {
		if n.store.Replica(d.RangeID) != nil {
			continue
		}
		if _, err := n.store.AddReplica(uninitializedDescriptor(d.RangeID)); errors.Is(err, store.ErrReplicaExists) {
			continue // created meanwhile (a snapshot of it arrived)
		} else if err != nil {
			return err
		}
		n.cfg.Logger.Info("created a replica to receive the range's snapshot", "range", uint64(d.RangeID), "via", n.cfg.Join)
	}
	return nil
}

// resumeJoin finishes the join of a node restarted after range 1 admitted
// it: if the member at cfg.Join has a range this node holds no replica
// of, or one where this node is not a voter, it joins again (join creates
// the missing replicas, and AddMember resumes where it stopped). Best
// effort: a member it cannot reach leaves things as they are, and
// `kvorum ctl member list` keeps showing the node as a learner.
func (n *Node) resumeJoin() {
	defer n.wg.Done()
	defer n.resumingJoin.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	b, err := n.trans.CallAddr(ctx, n.cfg.Join, methodRanges, nil)
	cancel()
	var descs []*storage.Descriptor
	if err != nil || json.Unmarshal(b, &descs) != nil {
		return
	}
	for _, d := range descs {
		rep, ok := d.Replica(n.id)
		if n.store.Replica(d.RangeID) == nil || !ok || rep.Learner {
			n.cfg.Logger.Info("resuming the join: a range has not admitted this node yet", "range", uint64(d.RangeID))
			if err := n.join(); err != nil && !errors.Is(err, store.ErrStopped) {
				n.cfg.Logger.Warn("could not resume the join", "err", err)
			}
			return
		}
	}
}

// learnClusterID asks the member at cfg.Join for the cluster's id, so that
// a joining node sends it to its peers and refuses other clusters' nodes
// (transport.Config.ClusterID), and records it. A node that cannot learn
// it (an older member, a failed call) keeps 0, which matches any cluster.
func (n *Node) learnClusterID(ctx context.Context) {
	if n.clusterID != 0 {
		return
	}
	b, err := n.trans.CallAddr(ctx, n.cfg.Join, methodCluster, nil)
	if err != nil || len(b) != 8 {
		n.cfg.Logger.Info("could not learn the cluster id; talking to any cluster's nodes", "via", n.cfg.Join, "err", err)
		return
	}
	id := binary.BigEndian.Uint64(b)
	if id == 0 {
		return
	}
	batch := n.db.NewBatch()
	defer batch.Close()
	if err := storage.SetIdent(batch, n.id, id); err != nil {
		return
	}
	if err := storage.Commit(batch, pebble.Sync); err != nil {
		n.cfg.Logger.Warn("could not record the cluster id", "err", err)
		return
	}
	n.clusterID = id
	n.trans.SetClusterID(id)
}

func sortReplicas(rs []storage.ReplicaDescriptor) {
	sort.Slice(rs, func(i, j int) bool { return rs[i].NodeID < rs[j].NodeID })
}

// clusterIDOf derives a cluster id from the initial member list, so every
// initial member computes the same one.
func clusterIDOf(members map[uint64]string) uint64 {
	ids := make([]uint64, 0, len(members))
	for id := range members {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	h := uint64(14695981039346656037)
	for _, id := range ids {
		for _, c := range fmt.Sprintf("%d=%s,", id, members[id]) {
			h ^= uint64(c)
			h *= 1099511628211
		}
	}
	return h
}
