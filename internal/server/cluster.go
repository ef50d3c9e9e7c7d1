package server

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/kvorum/kvorum/internal/kv"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/storage"
)

// Redis Cluster discovery (resp/cluster.go): the slot map comes from the
// same view of the members as Sentinel discovery (sentinel.go); here,
// where a cluster-aware client is sent (-MOVED) and a slot's keys.

// peerPort is the port of a peer address (0 if it has none).
func peerPort(addr string) int {
	_, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return 0
	}
	p, _ := strconv.Atoi(ps)
	return p
}

// MovedTo answers resp's -MOVED for cluster-aware connections: the
// client address of the leader of the slot's range (each range has its own),
// as the other members last told it (the discovery probes that CLUSTER
// commands start, as SENTINEL's do); none while this node leads, no
// leader is known, or its address is not known yet: the command then
// runs here and is forwarded.
func (b *backend) MovedTo(sl uint16, tls bool) (string, bool) {
	n := (*Node)(b)
	r := n.store.ReplicaForSlot(sl)
	if r == nil {
		r = n.store.Replica(firstRange)
	}
	lead, local := r.Leader()
	if local || lead == 0 {
		return "", false
	}
	s := &n.sentinel
	s.mu.Lock()
	defer s.mu.Unlock()
	// Cluster clients are active: keep the probes going (sentinelLoop),
	// so that the leader's address is known, and stays current.
	s.interest = time.Now()
	p := s.peers[storage.NodeID(lead)]
	if p == nil || !p.known {
		return "", false // not known yet: forwarded, as for any client
	}
	addr := p.info.Client
	if addr == "" || tls && p.info.TLSClient != "" {
		addr = p.info.TLSClient
	}
	return addr, addr != ""
}

// KeysInSlot answers CLUSTER COUNTKEYSINSLOT and GETKEYSINSLOT after a
// read barrier, so the answer is linearizable as any read.
func (b *backend) KeysInSlot(ctx context.Context, s uint16, max int) ([][]byte, int, *reply.Reply) {
	n := (*Node)(b)
	r := n.store.ReplicaForSlot(s)
	if r == nil {
		r = n.store.Replica(firstRange)
	}
	if errR := n.readBarrierOn(ctx, r); errR != nil {
		return nil, 0, errR
	}
	keys, count, err := kv.KeysInSlot(n.db, s, max, n.cfg.Now())
	if err != nil {
		e := reply.Error("ERR " + err.Error())
		return nil, 0, &e
	}
	return keys, count, nil
}
