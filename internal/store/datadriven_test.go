package store

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvorum/kvorum/internal/storage"
)

// TestDataDriven runs the scenarios in testdata/*.txt: a cluster of stores
// in one process, each on a memory FS, whose goroutines (ticker, Ready
// loop) are never started. The harness is every node's clock (Store.Tick)
// and Ready loop (processReady), and the network is a queue of messages it
// delivers itself, so the same file prints the same output on every run.
// After an intended change, regenerate the expected output with
//
//	go test ./internal/store -run TestDataDriven -rewrite
//
// and review the diff of testdata/ like code.
//
// Commands (node ids are positional; every node serves range 1):
//
//	add-nodes 3 [election=10] [heartbeat=1] [snapshot-threshold=0]
//	          [tick-interval=100ms] [lease-reads]
//	    The first call bootstraps nodes 1..3 as the range's voters (index
//	    10, term 5) and fixes the store config for the file; later calls
//	    add empty nodes that wait for a snapshot (see add-member). With a
//	    tick-interval, each node has a monotonic clock of its own (leases,
//	    the vote delay after a start) that every tick of the node advances
//	    by that much; without, there is no such clock (no leases, no
//	    delay). lease-reads sets Config.LeaseReads.
//	tick 1 [2 ...] [n=K]       K (default 1) ticks of each node's clock.
//	clock 1 [2 ...] d=300ms    advances the nodes' monotonic clocks without
//	                           a tick (a stalled ticker).
//	reads 1                    the node's read counters: lease reads,
//	                           ReadIndex rounds for reads, lease probes.
//	tick-election 2            ticks node 2 until its election timer fires
//	                           (the randomized count is not printed).
//	stabilize [quiet]          handles Ready on every node and delivers every
//	                           message, in rounds, until nothing moves; quiet
//	                           prints only the results of client calls.
//	propose 1 SET a 1 [repeat=K]
//	                           Replica.Propose of one command (K times: K
//	                           entries); with no command, each input line
//	                           is one command of the entry.
//	read 2 a                   Replica.ReadBarrier, then the value of a.
//	transfer-leader 1 to=2     Replica.TransferLeader.
//	add-member 1 id=4          Replica.AddMember (learner, catch-up, voter).
//	remove-member 1 id=3       Replica.RemoveMember.
//	isolate 1 | cut 1 2 | heal messages from/to 1 (between 1 and 2) are
//	                           dropped at delivery, until heal.
//	stop 3 | start 3           Store.Stop and close Pebble (a clean stop:
//	                           the memory FS keeps every write); reopen.
//	status                     every node's state and its pending calls.
//
// A node's state line reads
//
//	1: leader term=6 lead=1 last=12 commit=12 applied=12 truncated=10
//
// with the role and term, the leader it knows, the last index of its
// persisted log, raft's commit index, the index applied to Pebble, and the
// last index removed from the log (by a truncation or a snapshot). The
// trace prints it whenever it changes, and the members when they change.
//
// Client calls block, so each runs on a goroutine of its own. The harness
// waits until the call has either returned or begun to wait inside the
// store (probeCtx), and after every step (a tick, a delivered message, a
// Ready round) it checks each pending call: once the store has decided its
// outcome, the harness waits for the goroutine and prints the result. So a
// result appears in the trace at the step that released it.
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		e := &ddEnv{t: t}
		defer e.close()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			e.t = t
			e.out.Reset()
			e.run(d)
			if e.out.Len() == 0 {
				return "ok\n"
			}
			return e.out.String()
		})
	})
}

// ddEnv is the cluster of one scenario file.
type ddEnv struct {
	t      *testing.T
	out    strings.Builder
	quiet  bool   // trace off: print only results of client calls
	indent string // prefix of state lines and results ("  " inside a trace)

	election, heartbeat int
	threshold           uint64
	tickInterval        time.Duration
	leaseReads          bool

	nodes []*ddNode // nodes[i] has id i+1

	netMu sync.Mutex
	queue []*raftpb.Message // sent and not yet delivered, in send order

	cut      map[[2]uint64]bool
	isolated map[uint64]bool
}

type ddNode struct {
	id    uint64
	fs    vfs.FS
	db    *pebble.DB
	store *Store // nil while stopped
	ops   []*ddOp
	// clock is the node's monotonic clock (Store.mono) in ns since
	// ddEpoch; it survives restarts. reg holds the store's metrics.
	clock atomic.Int64
	reg   *prometheus.Registry

	// seen is the state line and members line last printed.
	seen, seenMembers string
}

func (e *ddEnv) run(d *datadriven.TestData) {
	switch d.Cmd {
	case "add-nodes":
		e.addNodes(d)
	case "tick":
		n := 1
		d.MaybeScanArgs(e.t, "n", &n)
		for _, nd := range e.nodeArgs(d) {
			for i := 0; i < n; i++ {
				e.tick(nd)
			}
		}
	case "clock":
		var s string
		d.ScanArgs(e.t, "d", &s)
		dur, err := time.ParseDuration(s)
		if err != nil {
			d.Fatalf(e.t, "clock: %v", err)
		}
		for _, nd := range e.nodeArgs(d) {
			nd.clock.Add(int64(dur))
		}
	case "reads":
		for _, nd := range e.nodeArgs(d) {
			e.printReads(nd)
		}
	case "tick-election":
		e.tickElection(e.nodeArg(d))
	case "stabilize":
		e.quiet, e.indent = d.HasArg("quiet"), "  "
		if e.quiet {
			e.indent = ""
		}
		e.stabilize()
		e.quiet, e.indent = false, ""
	case "propose":
		e.propose(d)
	case "read":
		if len(d.CmdArgs) != 2 {
			d.Fatalf(e.t, "usage: read <node> <key>")
		}
		e.read(e.nodeArg(d), d.CmdArgs[1].Key)
	case "transfer-leader":
		var to uint64
		d.ScanArgs(e.t, "to", &to)
		e.transferLeader(e.nodeArg(d), to)
	case "add-member":
		var id uint64
		d.ScanArgs(e.t, "id", &id)
		e.addMember(e.nodeArg(d), id)
	case "remove-member":
		var id uint64
		d.ScanArgs(e.t, "id", &id)
		e.removeMember(e.nodeArg(d), id)
	case "isolate":
		for _, n := range e.nodeArgs(d) {
			e.isolated[n.id] = true
		}
	case "cut":
		ns := e.nodeArgs(d)
		if len(ns) != 2 {
			d.Fatalf(e.t, "cut takes two nodes")
		}
		e.cut[[2]uint64{ns[0].id, ns[1].id}] = true
		e.cut[[2]uint64{ns[1].id, ns[0].id}] = true
	case "heal":
		e.cut, e.isolated = map[[2]uint64]bool{}, map[uint64]bool{}
	case "stop":
		for _, n := range e.nodeArgs(d) {
			e.stop(n)
		}
	case "start":
		for _, n := range e.nodeArgs(d) {
			e.start(n)
			e.printState(n)
		}
	case "status":
		for _, n := range e.nodes {
			n.seen, n.seenMembers = "", ""
			e.printState(n)
			for _, op := range n.ops {
				e.printf("  pending: %s\n", op.desc)
			}
		}
	default:
		d.Fatalf(e.t, "unknown command %q", d.Cmd)
	}
}

func (e *ddEnv) printf(format string, args ...any) { fmt.Fprintf(&e.out, format, args...) }

// tracef prints a line of the trace (nothing in quiet mode).
func (e *ddEnv) tracef(format string, args ...any) {
	if !e.quiet {
		e.printf(format, args...)
	}
}

// nodeArgs returns the nodes named by the command's positional numbers.
func (e *ddEnv) nodeArgs(d *datadriven.TestData) []*ddNode {
	var out []*ddNode
	for _, a := range d.CmdArgs {
		if len(a.Vals) > 0 {
			continue
		}
		id, err := strconv.ParseUint(a.Key, 10, 64)
		if err != nil {
			break
		}
		if id == 0 || id > uint64(len(e.nodes)) {
			d.Fatalf(e.t, "no node %d", id)
		}
		out = append(out, e.nodes[id-1])
	}
	if len(out) == 0 {
		d.Fatalf(e.t, "%s: name a node", d.Cmd)
	}
	return out
}

func (e *ddEnv) nodeArg(d *datadriven.TestData) *ddNode { return e.nodeArgs(d)[0] }

// addNodes implements add-nodes.
func (e *ddEnv) addNodes(d *datadriven.TestData) {
	count, err := strconv.Atoi(d.CmdArgs[0].Key)
	if err != nil || count <= 0 {
		d.Fatalf(e.t, "add-nodes: want a count, got %q", d.CmdArgs[0].Key)
	}
	bootstrap := len(e.nodes) == 0
	if bootstrap {
		e.election, e.heartbeat = 10, 1
		d.MaybeScanArgs(e.t, "election", &e.election)
		d.MaybeScanArgs(e.t, "heartbeat", &e.heartbeat)
		d.MaybeScanArgs(e.t, "snapshot-threshold", &e.threshold)
		if d.HasArg("tick-interval") {
			var s string
			d.ScanArgs(e.t, "tick-interval", &s)
			ti, err := time.ParseDuration(s)
			if err != nil {
				d.Fatalf(e.t, "tick-interval: %v", err)
			}
			e.tickInterval = ti
		}
		e.leaseReads = d.HasArg("lease-reads")
		e.cut, e.isolated = map[[2]uint64]bool{}, map[uint64]bool{}
	}
	first := len(e.nodes) + 1
	desc := (&storage.Descriptor{RangeID: 1}).FullSlots()
	for id := first; id < first+count; id++ {
		desc.Replicas = append(desc.Replicas, storage.ReplicaDescriptor{NodeID: storage.NodeID(id), PeerAddr: ddAddr(uint64(id))})
	}
	for id := first; id < first+count; id++ {
		n := &ddNode{id: uint64(id), fs: vfs.NewMem()}
		e.nodes = append(e.nodes, n)
		e.openDB(n)
		if bootstrap {
			b := n.db.NewBatch()
			if err := BootstrapRange(b, desc); err != nil {
				e.t.Fatal(err)
			}
			if err := b.Commit(pebble.Sync); err != nil {
				e.t.Fatal(err)
			}
		}
		e.start(n)
		e.printState(n)
	}
}

func ddAddr(id uint64) string { return fmt.Sprintf("n%d", id) }

func (e *ddEnv) openDB(n *ddNode) {
	db, err := storage.Open("/db", storage.Options{FS: n.fs})
	if err != nil {
		e.t.Fatal(err)
	}
	n.db = db
}

// start opens node n's store on what its FS holds. The store's goroutines
// are not started: the harness ticks it and handles its Ready.
func (e *ddEnv) start(n *ddNode) {
	if n.store != nil {
		e.t.Fatalf("node %d is running", n.id)
	}
	if n.db == nil {
		e.openDB(n)
	}
	n.reg = prometheus.NewRegistry()
	s := New(Config{
		NodeID: storage.NodeID(n.id), DB: n.db, FS: n.fs, Dir: "/db",
		Transport:     ddTransport{e},
		ElectionTicks: e.election, HeartbeatTicks: e.heartbeat,
		// TickInterval > 0 starts no ticker here: Start is never called.
		TickInterval:      e.tickInterval,
		LeaseReads:        e.leaseReads,
		SnapshotThreshold: e.threshold,
		StateMachine:      &regMachine{},
		Logger:            testLog(),
		Metrics:           NewMetrics(n.reg),
		Now:               func() int64 { return 1 },
	})
	s.mono = func() time.Time { return ddEpoch.Add(time.Duration(n.clock.Load())) }
	if _, err := s.AddReplica((&storage.Descriptor{RangeID: 1}).FullSlots()); err != nil {
		e.t.Fatal(err)
	}
	n.store = s
}

// stop stops node n's store (its pending calls end) and closes its Pebble.
func (e *ddEnv) stop(n *ddNode) {
	if n.store == nil {
		e.t.Fatalf("node %d is not running", n.id)
	}
	for _, op := range n.ops {
		if !op.stopSafe {
			e.t.Fatalf("stop %d: %s is pending and would not end", n.id, op.desc)
		}
	}
	n.store.Stop()
	e.settle()
	if len(n.ops) > 0 {
		e.t.Fatalf("node %d: calls still pending after Stop", n.id)
	}
	if err := n.db.Close(); err != nil {
		e.t.Fatal(err)
	}
	n.store, n.db = nil, nil
	e.printState(n)
}

// close ends every pending call and stops every store.
func (e *ddEnv) close() {
	for _, n := range e.nodes {
		for _, op := range n.ops {
			op.cancel()
		}
		if n.store != nil {
			n.store.Stop()
		}
		for _, op := range n.ops {
			e.result(op)
		}
		n.ops = nil
		if n.store != nil {
			_ = n.db.Close()
			n.store = nil
		}
	}
}

func (n *ddNode) replica() *Replica { return n.store.Replica(1) }

// up returns n's store; n must be running.
func (e *ddEnv) up(n *ddNode) *Store {
	if n.store == nil {
		e.t.Fatalf("node %d is down", n.id)
	}
	return n.store
}

// ddTransport is the store's Transport: messages wait in the env's queue
// until the harness delivers them. Peers are routed by id. The harness
// has one range: every message is range 1's.
type ddTransport struct{ e *ddEnv }

func (t ddTransport) Send(msgs []RaftMessage) {
	t.e.netMu.Lock()
	defer t.e.netMu.Unlock()
	for _, m := range msgs {
		if m.Range != 1 {
			t.e.t.Errorf("a message of range %d: %v", m.Range, m.Msg)
		}
		t.e.queue = append(t.e.queue, proto.Clone(m.Msg).(*raftpb.Message))
	}
}
func (ddTransport) SetPeer(uint64, string) {}
func (ddTransport) RemovePeer(uint64)      {}

// tick ticks n once.
func (e *ddEnv) tick(n *ddNode) {
	if n.store == nil {
		e.t.Fatalf("tick: node %d is down", n.id)
	}
	n.clock.Add(int64(e.tickInterval))
	n.store.Tick()
	e.settle()
	e.printState(n)
}

// ddEpoch is what the nodes' monotonic clocks start from.
var ddEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// printReads implements reads.
func (e *ddEnv) printReads(n *ddNode) {
	if n.store == nil {
		e.t.Fatalf("reads: node %d is down", n.id)
	}
	mfs, err := n.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	v := map[string]float64{}
	for _, mf := range mfs {
		if ms := mf.GetMetric(); len(ms) == 1 && ms[0].GetCounter() != nil {
			v[mf.GetName()] = ms[0].GetCounter().GetValue()
		}
	}
	e.printf("%d: lease-reads=%v read-index-rounds=%v lease-probes=%v\n", n.id,
		v["kvorum_raft_lease_reads_total"], v["kvorum_raft_read_index_rounds_total"], v["kvorum_raft_lease_probes_total"])
}

// tickElection ticks n until its election timer fires, that is until it is
// no longer a follower: the number of ticks is random (raft randomizes the
// timeout in [election, 2*election)), the outcome is not.
func (e *ddEnv) tickElection(n *ddNode) {
	if _, leads := e.up(n).Replica(1).Leader(); leads {
		e.t.Fatalf("tick-election: node %d leads", n.id)
	}
	for i := 0; i < 2*e.election; i++ {
		e.tick(n)
		if st := n.replica().Status(); st.Role != "follower" && st.Role != "learner" {
			return
		}
	}
	e.t.Fatalf("node %d did not campaign within %d ticks", n.id, 2*e.election)
}

// stabilize runs rounds of Ready handling on every node and delivery to
// every node until a round does nothing.
func (e *ddEnv) stabilize() {
	for round := 0; ; round++ {
		if round > 1000 {
			e.t.Fatal("stabilize: no fixed point after 1000 rounds")
		}
		moved := false
		for _, n := range e.nodes {
			if e.handleReady(n) {
				moved = true
			}
		}
		for _, n := range e.nodes {
			if e.deliver(n) {
				moved = true
			}
		}
		if !moved {
			return
		}
	}
}

func (n *ddNode) hasReady() bool {
	if n.store == nil {
		return false
	}
	r := n.replica()
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.mu.readQueue) > 0 || len(r.mu.pending) > 0 || r.mu.lease.renew || r.mu.rn.HasReady()
}

// handleReady is the Ready loop of node n, run until it has no more work.
func (e *ddEnv) handleReady(n *ddNode) bool {
	if !n.hasReady() {
		return false
	}
	e.tracef("> %d handling Ready\n", n.id)
	for n.hasReady() {
		_, err := n.store.processReadyGuarded()
		if err != nil {
			n.store.failFatal(err)
			e.printf("%s%d: store failed: %v\n", e.indent, n.id, err)
			break
		}
		e.settle()
	}
	e.printState(n)
	return true
}

// deliver hands node n every message queued for it, in send order, and
// reports whether there was any.
func (e *ddEnv) deliver(n *ddNode) bool {
	e.netMu.Lock()
	var mine, rest []*raftpb.Message
	for _, m := range e.queue {
		if m.GetTo() == n.id {
			mine = append(mine, m)
		} else {
			rest = append(rest, m)
		}
	}
	e.queue = rest
	e.netMu.Unlock()
	if len(mine) == 0 {
		return false
	}
	e.tracef("> %d receiving messages\n", n.id)
	// Identical dropped messages in a row (heartbeats of a leader ticked
	// while cut off) are printed once, with their number.
	var dropped string
	var times int
	flush := func() {
		if times > 1 {
			dropped += fmt.Sprintf(" x%d", times)
		}
		if times > 0 {
			e.tracef("  %s\n", dropped)
		}
		times = 0
	}
	for _, m := range mine {
		desc := strings.ReplaceAll(raft.DescribeMessage(m, ddFormatEntry), "\n", "\n  ")
		if why := e.blocked(m.GetFrom(), n); why != "" {
			line := fmt.Sprintf("%s DROPPED (%s)", desc, why)
			if line != dropped || times == 0 {
				flush()
				dropped = line
			}
			times++
			if m.GetType() == raftpb.MessageType_MsgSnap {
				e.reportSnapshot(m, false)
			}
			continue
		}
		flush()
		e.tracef("  %s\n", desc)
		if m.GetType() == raftpb.MessageType_MsgSnap {
			e.deliverSnapshot(n, m)
		} else {
			n.store.Step(1, m)
		}
		e.settle()
	}
	flush()
	e.printState(n)
	return true
}

// blocked says why a message from → to cannot be delivered, "" if it can.
func (e *ddEnv) blocked(from uint64, to *ddNode) string {
	switch {
	case to.store == nil:
		return fmt.Sprintf("%d is down", to.id)
	case e.isolated[from]:
		return fmt.Sprintf("%d is isolated", from)
	case e.isolated[to.id]:
		return fmt.Sprintf("%d is isolated", to.id)
	case e.cut[[2]uint64{from, to.id}]:
		return "link cut"
	}
	return ""
}

// deliverSnapshot streams the snapshot of m from its sender's store into
// n's, as the transport does, and reports the outcome to the sender.
func (e *ddEnv) deliverSnapshot(n *ddNode, m *raftpb.Message) {
	src := e.nodes[m.GetFrom()-1]
	if src.store == nil {
		e.tracef("  (sender %d is down: snapshot lost)\n", src.id)
		return
	}
	rc, err := src.store.OpenSnapshot(m.GetSnapshot())
	if err == nil {
		err = n.store.ReceiveSnapshot(RaftMessage{Range: 1, Msg: m}, rc)
		_ = rc.Close()
	}
	if err != nil {
		e.printf("  snapshot failed: %v\n", err)
	}
	e.reportSnapshot(m, err == nil)
}

func (e *ddEnv) reportSnapshot(m *raftpb.Message, ok bool) {
	if src := e.nodes[m.GetFrom()-1]; src.store != nil {
		src.replica().ReportSnapshot(m.GetTo(), ok)
	}
}

// ddFormatEntry shows a normal entry's commands ("SET a 1; INCR n") and a
// ReadIndex request's context as its sequence number.
func ddFormatEntry(data []byte) string {
	if len(data) == 0 {
		return ""
	}
	p, err := decodeEntry(data)
	if err != nil {
		if len(data) == 8 {
			return fmt.Sprintf("read#%d", binary.BigEndian.Uint64(data))
		}
		return fmt.Sprintf("%q", data)
	}
	var cmds [][][]byte
	for _, pr := range p.props {
		cmds = append(cmds, pr.cmds...)
	}
	return ddCmds(cmds)
}

func ddCmds(cmds [][][]byte) string {
	var parts []string
	for _, c := range cmds {
		var args []string
		for _, a := range c {
			args = append(args, string(a))
		}
		parts = append(parts, strings.Join(args, " "))
	}
	return strings.Join(parts, "; ")
}

// printState prints n's state line (and its members, when they changed)
// if it differs from what was printed last.
func (e *ddEnv) printState(n *ddNode) {
	line, members := fmt.Sprintf("%d: down", n.id), n.seenMembers
	if n.store != nil {
		st := n.replica().Status()
		line = fmt.Sprintf("%d: %s term=%d lead=%d last=%d commit=%d applied=%d truncated=%d",
			n.id, st.Role, st.Term, st.Leader, st.LastIndex, st.Commit, st.Applied, st.FirstIndex-1)
		var voters, learners []string
		for _, r := range st.Descriptor.Replicas {
			if r.Learner {
				learners = append(learners, fmt.Sprint(r.NodeID))
			} else {
				voters = append(voters, fmt.Sprint(r.NodeID))
			}
		}
		members = fmt.Sprintf("%d: voters=(%s)", n.id, strings.Join(voters, ","))
		if len(learners) > 0 {
			members += fmt.Sprintf(" learners=(%s)", strings.Join(learners, ","))
		}
	}
	if line != n.seen {
		e.tracef("%s%s\n", e.indent, line)
		n.seen = line
	}
	if members != n.seenMembers {
		e.tracef("%s%s\n", e.indent, members)
		n.seenMembers = members
	}
}
