package server

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/kvorum/kvorum/internal/resp"
	"github.com/kvorum/kvorum/internal/storage"
)

// Redis Sentinel discovery (resp/sentinel.go): the node tells clients
// who leads. A node knows its own client address only; it learns the
// others' by asking them over the peer port (methodSentinel), and keeps
// what they answered. Those calls also tell which members are reachable
// (s_down in the replies). They run while clients use discovery: for a
// minute after a SENTINEL or ROLE command, and while a client of this
// node is subscribed to +switch-master (go-redis's failover client
// stays subscribed); otherwise the node asks nobody.

const (
	methodSentinel = "sentinel"
	// sentinelChannel is where Sentinel announces a new master.
	sentinelChannel = "+switch-master"
	// sentinelProbeEvery is the period of the calls while clients use
	// discovery; sentinelProbeTimeout bounds one call.
	sentinelProbeEvery   = 250 * time.Millisecond
	sentinelProbeTimeout = 500 * time.Millisecond
	// sentinelInterest is how long the node keeps probing after a
	// discovery command.
	sentinelInterest = time.Minute
)

// sentinelInfo is what a node answers methodSentinel with: the addresses
// its clients reach it at and its state.
type sentinelInfo struct {
	Client    string `json:"client,omitempty"`     // plain-text client address ("": none)
	TLSClient string `json:"tls_client,omitempty"` // TLS client address ("": none)
	RunID     string `json:"run_id"`
	Applied   uint64 `json:"applied"`
}

// peerSeen is what this node knows of another member.
type peerSeen struct {
	info    sentinelInfo
	known   bool      // it answered at least once
	lastOK  time.Time // its last answer
	failing bool      // its last probe failed
	since   time.Time // failing since
}

// sentinelState is the node's discovery state (Node.sentinel).
type sentinelState struct {
	mu       sync.Mutex
	peers    map[storage.NodeID]*peerSeen
	interest time.Time // the last discovery command
	probed   time.Time // the last round of probes
	// lastLeader is the last leader seen, for the replies while there is
	// none.
	lastLeader storage.NodeID
	// announced is the leader address last published on +switch-master,
	// or first told a client ("" before).
	announced string
}

// selfInfo is this node's sentinelInfo.
func (n *Node) selfInfo() sentinelInfo {
	si := sentinelInfo{RunID: n.resp.RunID(), Applied: n.store.Replica(firstRange).Status().Applied}
	if n.cfg.ClientAddr != "-" {
		si.Client = n.dialableClientAddr(n.AdvertiseClientAddr())
	}
	if n.cfg.TLSClientAddr != "" {
		si.TLSClient = n.dialableClientAddr(n.TLSClientAddr())
	}
	return si
}

// dialableClientAddr replaces a wildcard host (a node listening on
// 0.0.0.0 without --advertise-client-addr) by the host of the node's
// advertised peer address, which the other nodes dial.
func (n *Node) dialableClientAddr(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil || !IsWildcard(addr) {
		return addr
	}
	if ph, _, err := net.SplitHostPort(n.AdvertisePeerAddr()); err == nil && !IsWildcard(n.AdvertisePeerAddr()) {
		return net.JoinHostPort(ph, port)
	}
	return addr
}

// sentinelID is a member's Sentinel id (SENTINEL MYID): 40 hex digits
// derived from the cluster and node ids, so stable across restarts.
func (n *Node) sentinelID(id storage.NodeID) string {
	sum := sha1.Sum(fmt.Appendf(nil, "kvorum-sentinel:%d:%d", n.clusterID, id))
	return hex.EncodeToString(sum[:])
}

// probePeers asks every other member for its sentinelInfo, concurrently,
// each call bounded by sentinelProbeTimeout.
func (n *Node) probePeers(ctx context.Context) {
	var wg sync.WaitGroup
	for _, rep := range n.memberUnion() {
		if rep.NodeID == n.id {
			continue
		}
		wg.Add(1)
		go func(id storage.NodeID) {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, sentinelProbeTimeout)
			b, err := n.trans.Call(cctx, uint64(id), methodSentinel, nil)
			cancel()
			var si sentinelInfo
			if err == nil {
				err = json.Unmarshal(b, &si)
			}
			now := time.Now()
			s := &n.sentinel
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.peers == nil {
				s.peers = map[storage.NodeID]*peerSeen{}
			}
			p := s.peers[id]
			if p == nil {
				p = &peerSeen{}
				s.peers[id] = p
			}
			if err != nil {
				n.cfg.Logger.Debug("sentinel: a member did not answer", "node", uint64(id), "err", err)
				if !p.failing {
					p.failing, p.since = true, now
				}
				return
			}
			p.info, p.known, p.lastOK, p.failing = si, true, now, false
		}(rep.NodeID)
	}
	wg.Wait()
	n.sentinel.mu.Lock()
	n.sentinel.probed = time.Now()
	n.sentinel.mu.Unlock()
}

// memberUnion is every member of every local range, each once, range 1's
// first: the CLUSTER commands report each range's members, whose
// addresses the probes learn (today every range has range 1's members,
// but a range's own leader must be reported even if that changes).
func (n *Node) memberUnion() []storage.ReplicaDescriptor {
	out := slices.Clone(n.store.Replica(firstRange).Descriptor().Replicas)
	seen := map[storage.NodeID]bool{}
	for _, rep := range out {
		seen[rep.NodeID] = true
	}
	for _, r := range n.store.Replicas() {
		for _, rep := range r.Descriptor().Replicas {
			if !seen[rep.NodeID] {
				seen[rep.NodeID] = true
				out = append(out, rep)
			}
		}
	}
	return out
}

// sentinelLoop keeps the probes going while clients use discovery and
// publishes +switch-master to this node's subscribers when the leader
// changes.
// It is one of the node's bg loops: Stop waits for it before it closes
// the store, and its calls are cancelled when the node stops.
func (n *Node) sentinelLoop() {
	defer n.bg.Done()
	t := time.NewTicker(sentinelProbeEvery)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-n.stopper:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		select {
		case <-n.stopper:
			return
		case <-t.C:
		}
		n.sentinel.mu.Lock()
		active := time.Since(n.sentinel.interest) < sentinelInterest
		n.sentinel.mu.Unlock()
		subscribed := n.resp.Receivers(false, []byte(sentinelChannel)) > 0
		if !active && !subscribed {
			continue
		}
		n.probePeers(ctx)
		topo := n.topology(false)
		if topo.Master.Down {
			continue
		}
		addr := net.JoinHostPort(topo.Master.Host, strconv.Itoa(topo.Master.Port))
		s := &n.sentinel
		s.mu.Lock()
		old := s.announced
		s.announced = addr
		s.mu.Unlock()
		if old != "" && old != addr && subscribed {
			oh, op, _ := net.SplitHostPort(old)
			msg := topo.MasterName + " " + oh + " " + op + " " + topo.Master.Host + " " + strconv.Itoa(topo.Master.Port)
			n.resp.Deliver(false, []byte(sentinelChannel), []byte(msg))
		}
	}
}

// Topology answers resp's ROLE and SENTINEL commands.
func (b *backend) Topology(ctx context.Context, tls bool) resp.Topology {
	n := (*Node)(b)
	s := &n.sentinel
	s.mu.Lock()
	s.interest = time.Now()
	stale := time.Since(s.probed) > 2*sentinelProbeEvery
	s.mu.Unlock()
	if stale {
		// The loop was idle: ask the others now (it takes over from here).
		n.probePeers(ctx)
	}
	return n.topology(tls)
}

// topology builds the cluster's Sentinel view from Raft's state and what
// the other members last answered.
func (n *Node) topology(tls bool) resp.Topology {
	r := n.store.Replica(firstRange)
	st := r.Status()
	now := time.Now()
	downAfter := n.electionTimeout()
	t := resp.Topology{
		MasterName: n.cfg.SentinelMasterName,
		MyID:       n.sentinelID(n.id),
		Epoch:      st.Term,
		DownAfter:  downAfter,
		SelfLeads:  st.Role == "leader",
	}
	pick := func(si sentinelInfo) (string, int, bool) {
		addr := si.Client
		if addr == "" || tls && si.TLSClient != "" {
			addr = si.TLSClient
		}
		host, ps, err := net.SplitHostPort(addr)
		if err != nil {
			return "", 0, false
		}
		port, err := strconv.Atoi(ps)
		return host, port, err == nil
	}
	self := n.selfInfo()
	t.Self.RunID, t.Self.Offset = self.RunID, self.Applied
	t.Self.Host, t.Self.Port, _ = pick(self)
	t.Self.ID, t.Self.BusPort = n.sentinelID(n.id), peerPort(n.AdvertisePeerAddr())

	instances := map[storage.NodeID]resp.Instance{n.id: t.Self}
	for _, rep := range st.Descriptor.Replicas {
		if !rep.Learner {
			t.Voters++
		}
	}
	s := &n.sentinel
	s.mu.Lock()
	for _, rep := range n.memberUnion() {
		if rep.NodeID == n.id {
			continue
		}
		p := s.peers[rep.NodeID]
		if p == nil || !p.known {
			continue // its address is not known yet
		}
		in := resp.Instance{RunID: p.info.RunID, Offset: p.info.Applied, LastOK: now.Sub(p.lastOK),
			ID: n.sentinelID(rep.NodeID), BusPort: peerPort(rep.PeerAddr)}
		var ok bool
		if in.Host, in.Port, ok = pick(p.info); !ok {
			continue
		}
		in.Disconnected = p.failing
		in.Down = p.failing || in.LastOK > downAfter
		if in.Down {
			in.DownFor = now.Sub(p.lastOK)
			if p.failing {
				in.DownFor = now.Sub(p.since)
			}
		}
		instances[rep.NodeID] = in
	}
	leader := storage.NodeID(st.Leader)
	m, ok := instances[leader]
	switch {
	case leader != 0 && ok:
		t.Master = m
		if !m.Down {
			s.lastLeader = leader
			if s.announced == "" && !tls {
				// The leader clients are told of first: +switch-master
				// announces changes from here on.
				s.announced = net.JoinHostPort(m.Host, strconv.Itoa(m.Port))
			}
		}
	default:
		// No leader, or one whose address this node has not learned:
		// the last leader seen (or this node), down.
		t.Master = t.Self
		if l, ok := instances[s.lastLeader]; ok && s.lastLeader != 0 {
			t.Master = l
		}
		t.Master.Down, t.Master.Disconnected = true, true
	}
	s.mu.Unlock()
	for _, rep := range st.Descriptor.Replicas {
		in, ok := instances[rep.NodeID]
		if !ok {
			continue
		}
		if rep.NodeID != leader {
			t.Replicas = append(t.Replicas, in)
		}
		if rep.NodeID != n.id {
			in.RunID = n.sentinelID(rep.NodeID)
			t.Sentinels = append(t.Sentinels, in)
		}
	}
	t.Slots = n.slotRanges(instances)
	return t
}

// slotRanges is every local range's slot interval with its own leader
// and members (CLUSTER SLOTS, SHARDS, NODES), sorted by slot. A replica
// that owns no slots yet (uninitialized: created for a range this node
// has not received a snapshot or split of) is skipped: another local
// replica, or none, still reports those slots. A range whose leader is
// not known, or whose address this node has not learned, has a master
// with no id, down.
func (n *Node) slotRanges(instances map[storage.NodeID]resp.Instance) []resp.SlotRange {
	var out []resp.SlotRange
	for _, r := range n.store.Replicas() {
		desc := r.Descriptor()
		if desc.StartSlot >= desc.EndSlot {
			continue
		}
		lead, _ := r.Leader()
		sr := resp.SlotRange{Start: int(desc.StartSlot), End: int(desc.EndSlot) - 1}
		if m, ok := instances[storage.NodeID(lead)]; lead != 0 && ok {
			sr.Master = m
		} else {
			sr.Master = resp.Instance{Down: true, Disconnected: true}
		}
		for _, rep := range desc.Replicas {
			if in, ok := instances[rep.NodeID]; ok && rep.NodeID != storage.NodeID(lead) {
				sr.Replicas = append(sr.Replicas, in)
			}
		}
		out = append(out, sr)
	}
	slices.SortFunc(out, func(a, b resp.SlotRange) int { return a.Start - b.Start })
	return out
}
