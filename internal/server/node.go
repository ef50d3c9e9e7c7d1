package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvorum/kvorum/internal/admin"
	"github.com/kvorum/kvorum/internal/kv"
	"github.com/kvorum/kvorum/internal/resp"
	"github.com/kvorum/kvorum/internal/resp/codec"
	"github.com/kvorum/kvorum/internal/slot"
	"github.com/kvorum/kvorum/internal/storage"
	"github.com/kvorum/kvorum/internal/store"
	"github.com/kvorum/kvorum/internal/tlsconf"
	"github.com/kvorum/kvorum/internal/transport"
)

// Version is the kvorum version reported by INFO, HELLO and `kvorum version`.
var Version = "0.1.0-dev"

// rangeID of the single range that covers the whole keyspace for now.
const firstRange storage.RangeID = 1

// Node is one running kvorum node: storage, Raft replicas, peer transport,
// RESP server and admin HTTP server.
type Node struct {
	cfg       Config
	id        storage.NodeID
	clusterID uint64
	db        *pebble.DB
	store     *store.Store
	trans     *transport.Transport
	resp      *resp.Server
	admin     *admin.Server
	reg       *prometheus.Registry
	// storageMetrics exports the storage engine's figures (storage_metrics.go).
	storageMetrics *storageCollector
	started        time.Time

	clientLis, peerLis, adminLis net.Listener
	tlsClientLis                 net.Listener // the TLS client port (nil: none)

	machine        *kvMachine   // package kv as the store's state machine (effects.go)
	delivered      *progress    // the newest log index whose effects effectsLoop acted on
	waiters        waiters      // clients blocked on keys (BLPOP, LOCK ACQUIRE, ...)
	leases         leaseTracker // lease renewals as applied here (lock.go)
	blockedClients atomic.Int64 // for INFO
	// inTimeoutTable counts the blocked clients whose wait has a timeout
	// (INFO clients_in_timeout_table).
	inTimeoutTable atomic.Int64
	lastPeerLookup atomic.Int64 // learnPeers rate limit (unix ns)
	load           loadRates    // per-range load rates (ranges_load.go)
	disk           diskMonitor  // free space guard (disk.go)
	mem            memGuard     // maxmemory guard (maxmemory.go)
	bq             *blockQueues // this node's waits in the blocked pops' queues (blockq.go)
	bqKick         chan struct{}
	sentinel       sentinelState // Sentinel discovery (sentinel.go)
	splitQ         *splitQueue   // automatic splits by size (ranges_splitqueue.go)

	// bg tracks loops that read the DB on their own (the expiry sweep):
	// Stop waits for them before it closes the DB.
	bg sync.WaitGroup
	// resumingJoin is set while resumeJoin runs: it creates replicas
	// (joinRanges) and the range repair loop waits for it to finish.
	resumingJoin atomic.Bool
	// testBeforeAddTo, if set, runs in AddMember before the member is
	// added to each range: tests make a split race the add with it.
	testBeforeAddTo atomic.Pointer[func(storage.RangeID)]

	stopOnce sync.Once
	stopper  chan struct{}
	wg       sync.WaitGroup
	done     chan error
}

// Start opens the data directory, recovers or bootstraps state, starts all
// listeners and returns once they accept connections. With Join set it also
// waits until the cluster has admitted this node. It does not wait for a
// leader (see WaitLeader).
func Start(cfg Config) (n *Node, err error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Certificates are read before anything else is opened, so that a
	// wrong file is reported at once.
	clientTLS, adminTLS, err := loadTLS(&cfg)
	if err != nil {
		return nil, err
	}
	n = &Node{cfg: cfg, reg: prometheus.NewRegistry(), machine: newKVMachine(cfg.RecordCache, int64(cfg.ReadCache)), bq: newBlockQueues(), bqKick: make(chan struct{}, 1), delivered: newProgress(), stopper: make(chan struct{}), done: make(chan error, 1), started: time.Now()}
	node := n // the error returns below set n to nil
	defer func() {
		if err != nil {
			node.closeAll()
		}
	}()
	if n.db, err = storage.Open(cfg.DataDir, storage.Options{FS: cfg.FS, Logger: cfg.Logger, BackgroundFatal: cfg.StorageFatal, CacheSize: int64(cfg.CacheSize), MemTableSize: uint64(cfg.MemTableSize)}); err != nil {
		return nil, err
	}
	// Before anything reads the store: a store of an earlier release is
	// converted to the current storage format once (a new one is marked).
	if err = kv.MigrateV2(n.db, cfg.Logger); err != nil {
		return nil, fmt.Errorf("storage format 2 migration: %w", err)
	}
	descs, err := n.recoverOrBootstrap()
	if err != nil {
		return nil, err
	}
	desc := descs[0]
	log := cfg.Logger.With("node", uint64(n.id))

	var peerTLS *transport.PeerTLS
	if cfg.PeerTLS.Enabled() {
		if peerTLS, err = transport.NewPeerTLS(cfg.PeerTLS, log); err != nil {
			return nil, err
		}
	}
	if n.peerLis, err = net.Listen("tcp", cfg.PeerAddr); err != nil {
		return nil, fmt.Errorf("listen on peer address: %w", err)
	}
	// The RESP server exists before the store applies anything: applied
	// PUBLISHes are delivered to it. It accepts clients only later.
	users, err := newACLUsers(&cfg, resp.ACLCommands(kv.Table{}.Specs()), log)
	if err != nil {
		return nil, err
	}
	if err = users.load(n.db); err != nil {
		return nil, err
	}
	n.machine.acl, n.machine.db = users, n.db
	rc := resp.Config{
		Limits:     codec.Limits{MaxArgs: cfg.MaxArgs, MaxFrameSize: cfg.MaxFrameSize},
		Commands:   kv.Table{Limits: kv.Limits{MaxKeySize: cfg.MaxKeySize, MaxValueSize: cfg.MaxValueSize}},
		MaxClients: cfg.MaxClients,
		Logger:     log,
		Registerer: n.reg,
		NodeID:     uint64(n.id),
		Version:    Version,
		Scripts:    &n.machine.scripts,
		TLS: resp.TLSParams{CertFile: cfg.TLSCertFile, KeyFile: cfg.TLSKeyFile, CAFile: cfg.TLSCAFile,
			AuthClients: string(cfg.tlsAuthClients())},
	}
	users.respConfig(&cfg, &rc)
	n.resp = resp.NewServer(rc, (*backend)(n))
	users.changed = n.resp.UsersChanged
	n.trans = transport.New(transport.Config{NodeID: uint64(n.id), ClusterID: n.clusterID, Logger: log, Registerer: n.reg, Interceptor: cfg.PeerInterceptor, TLS: peerTLS, Dial: cfg.PeerDial}, (*peerHandler)(n), n.openSnapshot)
	n.store = store.New(store.Config{
		NodeID: n.id, DB: n.db, FS: cfg.FS, Dir: cfg.DataDir, Transport: n.trans,
		TickInterval: cfg.TickInterval, ElectionTicks: cfg.ElectionTicks, HeartbeatTicks: cfg.HeartbeatTicks,
		SnapshotThreshold: cfg.SnapshotThreshold, Logger: log, Metrics: store.NewMetrics(n.reg),
		StateMachine: n.machine, Now: cfg.Now, UnsafeNoSync: cfg.Unsafe.NoSync,
		LeaseReads: cfg.LeaseReads,
	})
	n.wg.Add(1)
	go n.effectsLoop(n.store.Effects())
	n.store.CleanStaged()
	for _, desc := range descs {
		if _, err = n.store.AddReplica(desc); err != nil {
			return nil, err
		}
	}
	n.store.Start()
	n.registerRaftGauges()
	n.reg.MustRegister(newRangeCollector(n))
	n.splitQ = newSplitQueue(n.reg)
	n.storageMetrics = newStorageCollector(n.db)
	n.reg.MustRegister(n.storageMetrics)
	if sh := n.machine.shared; sh != nil {
		n.reg.MustRegister(newReadCacheCollector(sh))
	}
	trans, peerLis := n.trans, n.peerLis // n is nil in the closure if Start fails
	n.goServe("peer", func() error { return trans.Serve(peerLis) })

	// A node restarted after it joined is already a member (its descriptor
	// lists it) and must not ask again; one that crashed before the
	// snapshot that admits it arrived asks again.
	if _, member := desc.Replica(n.id); cfg.Join != "" && !member {
		if err := n.join(); err != nil {
			return nil, err
		}
	} else if cfg.Join != "" {
		// A member of range 1 that may have stopped before every other
		// range admitted it (range 1 is joined first): it finishes the
		// join in the background, serving meanwhile.
		n.wg.Add(1)
		n.resumingJoin.Store(true) // before the repair loop starts: see repairHoles
		go n.resumeJoin()
	}

	rs := n.resp
	if cfg.ClientAddr != "-" {
		if n.clientLis, err = net.Listen("tcp", cfg.ClientAddr); err != nil {
			return nil, fmt.Errorf("listen on client address: %w", err)
		}
		clientLis := n.clientLis
		n.goServe("client", func() error { return rs.Serve(clientLis) })
	}
	if cfg.TLSClientAddr != "" {
		if n.tlsClientLis, err = net.Listen("tcp", cfg.TLSClientAddr); err != nil {
			return nil, fmt.Errorf("listen on TLS client address: %w", err)
		}
		tlsLis := n.tlsClientLis
		n.goServe("client-tls", func() error { return rs.ServeTLS(tlsLis, clientTLS) })
	}

	if cfg.AdminAddr != "-" {
		if n.adminLis, err = net.Listen("tcp", cfg.AdminAddr); err != nil {
			return nil, fmt.Errorf("listen on admin address: %w", err)
		}
		n.admin = admin.New(admin.Config{Node: (*adminAPI)(n), Registry: n.reg, Logger: log,
			Token: cfg.AdminToken, CertAuth: cfg.AdminTLSCAFile != "", Pprof: cfg.Pprof})
		adm, adminLis := n.admin, n.adminLis
		if adminTLS != nil {
			adminLis = tls.NewListener(adminLis, adminTLS)
		}
		n.goServe("admin", func() error { return adm.Serve(adminLis) })
	}

	n.startDiskMonitor()
	n.bg.Add(7)
	go n.configQueueLoop() // configcopy.go
	go n.expiryLoop()
	go n.leaseLoop()
	go n.blockQueueLoop()
	go n.sentinelLoop()
	go n.rangesRepairLoop()
	go n.splitQueueLoop() // ranges_splitqueue.go; returns at once when off
	n.wg.Add(1)
	go n.watchFatal()
	n.wg.Add(1)
	go n.rangeLoadLoop() // ranges_load.go
	log.Info("node started", "client", n.ClientAddr(), "client_tls", n.TLSClientAddr(), "peer", n.PeerAddr(), "admin", n.AdminAddr(),
		"advertise_client", n.AdvertiseClientAddr(), "advertise_peer", n.AdvertisePeerAddr())
	if rep, ok := desc.Replica(n.id); ok && cfg.AdvertisePeerAddr != "" && rep.PeerAddr != cfg.AdvertisePeerAddr {
		log.Warn("the cluster lists this node at another peer address than it advertises; the others dial the listed one", "listed", rep.PeerAddr, "advertised", n.AdvertisePeerAddr())
	}
	return n, nil
}

// recoverOrBootstrap reads the node's identity, or creates it for a new
// node, and returns the descriptors of its ranges: the first range's, then
// every other range's the store holds, in range id order. Range ids have
// gaps (a split allocates its id; docs/ranges.md §3.5), so they are found
// by a scan of the descriptor keys (storage.LoadDescriptors), not by
// probing 2, 3, ... until one is missing.
func (n *Node) recoverOrBootstrap() ([]*storage.Descriptor, error) {
	desc, err := n.recoverOrBootstrap1()
	if err != nil {
		return nil, err
	}
	all, err := storage.LoadDescriptors(n.db)
	if err != nil {
		return nil, err
	}
	descs := []*storage.Descriptor{desc}
	for _, d := range all {
		if d.RangeID != firstRange {
			descs = append(descs, d)
		}
	}
	return descs, nil
}

// uninitializedDescriptor is the descriptor of a replica that has no
// state yet and waits for the snapshot that the range's leader sends
// once it adds this node (a joining node's): no replicas and an empty
// slot interval. Empty, so that routing (Store.ReplicaForSlot) sends no
// key to it before it has data, and so that installing its snapshot
// clears only what its own span holds (StateMachine.Span of this
// descriptor): with several ranges a full interval would wipe the
// ranges whose snapshots arrived first. The snapshot's descriptor
// replaces it, and the store rebuilds its slot table then.
func uninitializedDescriptor(id storage.RangeID) *storage.Descriptor {
	return &storage.Descriptor{RangeID: id}
}

// splitForTest divides desc's slots into n ranges of equal intervals
// (the last takes the remainder), with desc's replicas: ranges 1..n.
func splitForTest(desc *storage.Descriptor, n int) []*storage.Descriptor {
	out := make([]*storage.Descriptor, n)
	per := slot.Count / n
	for i := range out {
		d := desc.Clone()
		d.RangeID = firstRange + storage.RangeID(i)
		d.StartSlot, d.EndSlot = uint16(i*per), uint16((i+1)*per)
		if i == n-1 {
			d.EndSlot = slot.Count
		}
		out[i] = d
	}
	return out
}

// recoverOrBootstrap1 is recoverOrBootstrap for the first range (and, for
// a new node of a cluster started with Config.testRanges, bootstraps the
// others).
func (n *Node) recoverOrBootstrap1() (*storage.Descriptor, error) {
	id, cluster, err := storage.LoadIdent(n.db)
	if err != nil {
		return nil, err
	}
	cfg := &n.cfg
	if id != 0 {
		if cfg.ID != 0 && storage.NodeID(cfg.ID) != id {
			return nil, fmt.Errorf("data directory %s belongs to node %d, not %d", cfg.DataDir, id, cfg.ID)
		}
		n.id, n.clusterID = id, cluster
		desc, ok, err := storage.LoadDescriptor(n.db, firstRange)
		if err != nil {
			return nil, err
		}
		if !ok { // joined but never received a snapshot
			desc = uninitializedDescriptor(firstRange)
		}
		return desc, nil
	}
	if cfg.ID == 0 {
		return nil, errors.New("--id is required for a new node (the data directory is empty)")
	}
	n.id = storage.NodeID(cfg.ID)
	b := n.db.NewBatch()
	defer b.Close()
	desc := (&storage.Descriptor{RangeID: firstRange}).FullSlots()
	switch {
	case cfg.Join != "":
		// State arrives by snapshot once the leader adds us.
		desc = uninitializedDescriptor(firstRange)
	default:
		members := cfg.InitialCluster
		if len(members) == 0 {
			addr := cfg.PeerAddr
			if cfg.AdvertisePeerAddr != "" {
				addr = cfg.AdvertisePeerAddr
			} else if IsWildcard(addr) {
				cfg.Logger.Warn("this single-node cluster lists its member at its wildcard --peer-addr, which nodes joining later cannot dial; set --advertise-peer-addr on the first start of a node that others will join", "peer_addr", addr)
			}
			members = map[uint64]string{cfg.ID: addr}
		}
		for mid, addr := range members {
			desc.Replicas = append(desc.Replicas, storage.ReplicaDescriptor{NodeID: storage.NodeID(mid), PeerAddr: addr})
		}
		sortReplicas(desc.Replicas)
		n.clusterID = clusterIDOf(members)
		if cfg.testRanges > 1 {
			// A test's cluster whose keyspace is already split: every
			// node bootstraps the same ranges, with the same replicas.
			all := splitForTest(desc, cfg.testRanges)
			for _, d := range all {
				if err := store.BootstrapRange(b, d); err != nil {
					return nil, err
				}
			}
			desc = all[0]
		} else if err := store.BootstrapRange(b, desc); err != nil {
			return nil, err
		}
	}
	if err := storage.SetIdent(b, n.id, n.clusterID); err != nil {
		return nil, err
	}
	if err := storage.Commit(b, pebble.Sync); err != nil {
		return nil, err
	}
	return desc, nil
}

func (n *Node) goServe(what string, serve func() error) {
	n.wg.Add(1)
	wg, log := &n.wg, n.cfg.Logger // Start's n may be nil by the time serve returns
	go func() {
		defer wg.Done()
		if err := serve(); err != nil && !isClosedErr(err) {
			log.Error("server stopped", "server", what, "err", err)
		}
	}()
}

func isClosedErr(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, transport.ErrClosed) || errors.Is(err, resp.ErrServerClosed)
}

// watchFatal stops the node when storage fails: it must never keep running
// on a state it could not persist.
func (n *Node) watchFatal() {
	defer n.wg.Done()
	select {
	case <-n.stopper:
	case err := <-n.store.Fatal():
		n.cfg.Logger.Error("fatal storage error; stopping node", "err", err)
		go func() {
			_ = n.Stop()
			n.done <- err
		}()
	}
}

// Done delivers an error if the node stopped by itself (a storage failure).
func (n *Node) Done() <-chan error { return n.done }

// Stop shuts the node down cleanly: stops accepting clients, stops Raft,
// flushes and closes storage. Safe to call twice.
func (n *Node) Stop() error {
	var err error
	n.stopOnce.Do(func() {
		close(n.stopper)
		n.bg.Wait() // found by the torture harness: the sweep read a closed DB
		err = n.closeAll()
		n.wg.Wait()
	})
	return err
}

// Shutdown stops the node like Stop, but a leader first hands its
// leadership to the most up-to-date live voter (raft's leadership
// transfer: the voter is caught up, then campaigns at once), so that the
// cluster does not sit out an election timeout without a leader: clients
// and lock waiters see a pause of a few round trips instead of about a
// second, and the new leader's lease grace starts from there. Writes
// arriving meanwhile are retried on the new leader. If no voter can take
// over within two election timeouts (or ctx ends), the node stops anyway
// and the others elect a leader as after a crash.
func (n *Node) Shutdown(ctx context.Context) error {
	// Every range this node leads, range 1 last (docs/ranges.md §3.5b).
	// The others at the same time, shutdownHandOvers at once: one after
	// the other, a node leading hundreds of ranges whose peers are gone
	// took two election timeouts per range to stop.
	order := n.rangeOrder(true)
	sem := make(chan struct{}, shutdownHandOvers)
	var wg sync.WaitGroup
	for _, rg := range order[:len(order)-1] {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			n.handOverBeforeStop(ctx, rg)
		}()
	}
	wg.Wait()
	n.handOverBeforeStop(ctx, firstRange)
	return n.Stop()
}

// shutdownHandOvers bounds the leadership transfers Shutdown runs at once.
const shutdownHandOvers = 64

// handOverBeforeStop hands range rg's leadership over if this node leads
// it, and logs the outcome (Shutdown).
func (n *Node) handOverBeforeStop(ctx context.Context, rg storage.RangeID) {
	r := n.store.Replica(rg)
	if r == nil {
		return
	}
	if to, err := n.handOverLeadership(ctx, r); to != 0 {
		if err != nil {
			n.cfg.Logger.Warn("could not hand leadership over before stopping; the others will elect a leader", "node", uint64(n.id), "range", uint64(rg), "to", to, "err", err)
		} else {
			n.cfg.Logger.Info("handed leadership over before stopping", "node", uint64(n.id), "range", uint64(rg), "to", to)
		}
	}
}

// handOverLeadership moves leadership of r's range to the voter with the
// highest match index, among those recently active if any, if this node
// leads.
// It returns the chosen voter (0: none, nothing done).
func (n *Node) handOverLeadership(ctx context.Context, r *store.Replica) (uint64, error) {
	select {
	case <-n.stopper:
		return 0, nil
	default:
	}
	st := r.Status()
	if st.Role != "leader" {
		return 0, nil
	}
	// Prefer a voter heard from since the last quorum check; raft clears
	// that mark for every follower at each check, until its next reply
	// (within a heartbeat), so right after a check take the voter that
	// has the most of the log.
	var to, match uint64
	active := false
	for _, rep := range st.Descriptor.Replicas {
		id := uint64(rep.NodeID)
		pr, ok := st.Progress[id]
		if rep.Learner || id == uint64(n.id) || !ok || pr.Match == 0 {
			continue
		}
		if to == 0 || pr.RecentActive && !active || pr.RecentActive == active && pr.Match > match {
			to, match, active = id, pr.Match, pr.RecentActive
		}
	}
	if to == 0 {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*n.electionTimeout())
	defer cancel()
	return to, r.TransferLeader(ctx, to)
}

func (n *Node) closeAll() error {
	if n.admin != nil {
		_ = n.admin.Close()
	} else if n.adminLis != nil {
		_ = n.adminLis.Close()
	}
	if n.resp != nil {
		_ = n.resp.Close()
	}
	// A listener Serve has not taken yet (Start failed in between): the
	// server's Close does not know it.
	for _, l := range []net.Listener{n.clientLis, n.tlsClientLis} {
		if l != nil {
			_ = l.Close()
		}
	}
	if n.store != nil {
		n.store.Stop()
	}
	if n.trans != nil {
		_ = n.trans.Close()
	} else if n.peerLis != nil {
		_ = n.peerLis.Close()
	}
	if n.storageMetrics != nil {
		n.storageMetrics.detach()
	}
	if n.db != nil && n.store != nil && n.store.DBWedged() {
		// Pebble's commit pipeline is stuck (storage/fault.go): Close would
		// block forever. Abandon the DB; a restart replays its WAL.
		n.db = nil
		return n.store.Failure()
	}
	if n.db != nil {
		err := n.db.Close()
		n.db = nil
		return err
	}
	return nil
}

// WaitLeader blocks until this node knows a leader and has applied
// everything committed when it learned of it (a read barrier succeeds).
func (n *Node) WaitLeader(ctx context.Context) error {
	r := n.store.Replica(firstRange)
	for {
		if lead, _ := r.Leader(); lead != 0 {
			bctx, cancel := context.WithTimeout(ctx, 2*n.electionTimeout())
			err := r.ReadBarrier(bctx)
			cancel()
			if err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no leader elected: %w", ctx.Err())
		case <-n.stopper:
			return store.ErrStopped
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (n *Node) electionTimeout() time.Duration {
	return time.Duration(n.cfg.ElectionTicks) * n.cfg.TickInterval
}

// ID returns the node id. ClientAddr/PeerAddr/AdminAddr return the bound
// addresses (useful when configured with port 0).
func (n *Node) ID() uint64 { return uint64(n.id) }

// ClientAddr returns the RESP listener's address.
func (n *Node) ClientAddr() string { return lisAddr(n.clientLis, n.cfg.ClientAddr) }

// TLSClientAddr returns the TLS client listener's address ("" if none).
func (n *Node) TLSClientAddr() string { return lisAddr(n.tlsClientLis, n.cfg.TLSClientAddr) }

// PeerAddr returns the peer listener's address.
func (n *Node) PeerAddr() string { return lisAddr(n.peerLis, n.cfg.PeerAddr) }

// AdvertisePeerAddr returns the peer address this node tells the cluster
// to reach it at: Config.AdvertisePeerAddr, else the peer listener's.
func (n *Node) AdvertisePeerAddr() string {
	if n.cfg.AdvertisePeerAddr != "" {
		return n.cfg.AdvertisePeerAddr
	}
	return n.PeerAddr()
}

// AdvertiseClientAddr returns the client address this node reports:
// Config.AdvertiseClientAddr, else the RESP listener's.
func (n *Node) AdvertiseClientAddr() string {
	if n.cfg.AdvertiseClientAddr != "" {
		return n.cfg.AdvertiseClientAddr
	}
	return n.ClientAddr()
}

// AdminAddr returns the admin HTTP listener's address.
func (n *Node) AdminAddr() string { return lisAddr(n.adminLis, n.cfg.AdminAddr) }

// Registry returns the node's metrics registry.
func (n *Node) Registry() *prometheus.Registry { return n.reg }

func lisAddr(l net.Listener, def string) string {
	if l == nil {
		return def
	}
	return l.Addr().String()
}

// registerRaftGauges exports the Raft state of the node's range as gauges
// read at scrape time.
func (n *Node) registerRaftGauges() {
	status := func(f func(st store.Status) float64) func() float64 {
		return func() float64 { return f(n.store.Replica(firstRange).Status()) }
	}
	g := func(name, help string, f func(st store.Status) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, status(f))
	}
	n.reg.MustRegister(
		g("kvorum_raft_term", "Current Raft term.", func(st store.Status) float64 { return float64(st.Term) }),
		g("kvorum_raft_leader", "Node id of the known leader (0 = none).", func(st store.Status) float64 { return float64(st.Leader) }),
		g("kvorum_raft_is_leader", "1 if this node leads its range.", func(st store.Status) float64 {
			if st.Role == "leader" {
				return 1
			}
			return 0
		}),
		g("kvorum_raft_commit_index", "Raft commit index.", func(st store.Status) float64 { return float64(st.Commit) }),
		g("kvorum_raft_applied_index", "Last applied index.", func(st store.Status) float64 { return float64(st.Applied) }),
		g("kvorum_raft_log_entries", "Entries held in the Raft log.", func(st store.Status) float64 {
			return float64(st.LastIndex + 1 - st.FirstIndex)
		}),
		g("kvorum_raft_members", "Voters and learners of the range.", func(st store.Status) float64 {
			return float64(len(st.Descriptor.Replicas))
		}),
	)
}

// StateHash returns the applied index and kv.StateHash of this node's
// state, read from one consistent Pebble snapshot. With several ranges,
// applied is the sum of every range's applied index: two nodes may show
// the same sum at different per-range indexes for a moment, so a caller
// that finds equal sums and different hashes must see it again, with the
// sums unchanged, before it calls that a divergence.
func (n *Node) StateHash() (applied uint64, sum [32]byte, keys int, err error) {
	snap := n.db.NewSnapshot()
	defer snap.Close()
	descs, err := storage.LoadDescriptors(snap)
	if err != nil {
		return 0, sum, 0, err
	}
	ids := []storage.RangeID{firstRange}
	for _, d := range descs {
		if d.RangeID != firstRange {
			ids = append(ids, d.RangeID)
		}
	}
	for _, id := range ids {
		st, err := storage.LoadAppliedState(snap, id)
		if err != nil {
			return 0, sum, 0, err
		}
		applied += st.Index
	}
	sum, keys, err = kv.StateHash(snap)
	return applied, sum, keys, err
}

// loadTLS reads the certificate files of the client and admin ports
// (nil configs where TLS is off).
func loadTLS(cfg *Config) (client, adm *tls.Config, err error) {
	if cfg.TLSClientAddr != "" {
		client, err = tlsconf.Server(tlsconf.Files{
			Cert: cfg.TLSCertFile, Key: cfg.TLSKeyFile, CA: cfg.TLSCAFile, ClientAuth: cfg.tlsAuthClients(),
			CertFlag: "--tls-cert-file", KeyFlag: "--tls-key-file", CAFlag: "--tls-ca-cert-file",
		}, cfg.Logger.With("port", "client-tls"))
		if err != nil {
			return nil, nil, err
		}
	}
	if cfg.AdminAddr != "-" && cfg.AdminTLSCertFile != "" {
		// Client certificates are verified if sent, not required: the
		// probes (/healthz, /readyz) stay open; the admin server requires
		// a certificate or the token on the other paths.
		adm, err = tlsconf.Server(tlsconf.Files{
			Cert: cfg.AdminTLSCertFile, Key: cfg.AdminTLSKeyFile, CA: cfg.AdminTLSCAFile, ClientAuth: tlsconf.AuthOptional,
			CertFlag: "--admin-tls-cert-file", KeyFlag: "--admin-tls-key-file", CAFlag: "--admin-tls-ca-cert-file",
		}, cfg.Logger.With("port", "admin"))
		if err != nil {
			return nil, nil, err
		}
	}
	return client, adm, nil
}
