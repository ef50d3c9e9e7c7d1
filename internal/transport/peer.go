package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/kvorum/kvorum/internal/storage"
)

// peer is one remote node: its address and connection, the queue of raft
// messages for it and the goroutine (loop) that drains that queue into a
// long-lived Raft stream, and the pipe of its pipelined calls (calls.go).
type peer struct {
	t      *Transport
	id     uint64
	out    *outbox
	calls  *pipe           // the call stream (calls.go)
	ctx    context.Context // canceled by RemovePeer or Close
	cancel context.CancelFunc

	mu   sync.Mutex
	addr string
	conn *grpc.ClientConn
	err  error // from creating conn

	// Owned by loop.
	stream     *connStream // the Raft stream (stream.go); nil: none open
	streamAddr string      // the address it was opened to
	failing    bool
	encBuf     []byte // deliver's frame buffer, reused
}

// maxKeptEncBuf: a larger frame buffer (a burst of big entries) is not
// kept for the next batch.
const maxKeptEncBuf = 1 << 20

// setAddr points the peer at addr. A changed address gets a new
// connection; the old one is closed, which breaks the stream on it and
// makes loop reopen it on the new connection.
func (p *peer) setAddr(addr string) {
	p.mu.Lock()
	if p.addr == addr && (p.conn != nil || p.err != nil) {
		p.mu.Unlock()
		return
	}
	old := p.conn
	p.addr = addr
	p.conn, p.err = p.t.newConn(addr)
	if p.err != nil {
		p.t.log.Error("bad peer address", "peer", p.id, "addr", addr, "err", p.err)
	}
	p.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
}

func (p *peer) getAddr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

func (p *peer) getConn() (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn == nil {
		return nil, fmt.Errorf("transport: peer %d at %q: %w", p.id, p.addr, p.err)
	}
	return p.conn, nil
}

func (p *peer) loop() {
	defer p.t.wg.Done()
	p.out.run(p.ctx.Done(), p.deliver)
	p.closeStream()
	p.mu.Lock()
	conn := p.conn
	p.conn = nil
	p.err = ErrClosed
	p.mu.Unlock()
	if conn != nil {
		_ = conn.Close()
	}
}

func (p *peer) closeStream() {
	if p.stream != nil {
		p.stream.cancel()
		p.stream = nil
	}
}

// deliver writes batch to the peer's Raft stream, opening it if needed. On
// failure, the unsent messages are counted as dropped, the peer is reported
// unreachable and the error makes loop back off.
func (p *peer) deliver(batch []storage.RaftMessage) error {
	t := p.t
	// The frames are written before deliver returns: the buffer is reused.
	frames, counts, buf, err := encodeBatch(p.encBuf[:0], t.cfg.NodeID, p.id, batch)
	if cap(buf) <= maxKeptEncBuf {
		p.encBuf = buf
	}
	if err != nil {
		// A message that cannot be marshalled is a bug, not a network
		// problem: drop the batch without backing off.
		t.log.Error("cannot encode raft messages", "peer", p.id, "err", err)
		t.m.dropAll(batch, dropSendFailed)
		return nil
	}
	sent := 0
	err = p.openStream()
	if err == nil {
		for i, f := range frames {
			if err = p.stream.SendMsg(&frame{b: f}); err != nil {
				p.closeStream()
				break
			}
			t.m.framesSent.Add(1)
			t.m.frames.Inc()
			t.m.bytesSent.Add(float64(len(f)))
			t.m.sentMsgs(batch[sent : sent+counts[i]])
			sent += counts[i]
		}
	}
	if err != nil {
		t.m.dropAll(batch[sent:], dropSendFailed)
		if p.ctx.Err() != nil {
			return err // removed or closing: nobody to report to
		}
		t.rep.unreachable(p.id)
		if !p.failing {
			p.failing = true
			t.log.Warn("peer unreachable", "peer", p.id, "addr", p.getAddr(), "err", err)
		} else {
			t.log.Debug("peer still unreachable", "peer", p.id, "err", err)
		}
		return err
	}
	if p.failing {
		p.failing = false
		t.log.Info("peer reachable again", "peer", p.id, "addr", p.getAddr())
	}
	return nil
}

// dialAddr is the address a framed stream to the peer is opened to; an
// error when the address is bad or the peer is closed (getConn's).
func (p *peer) dialAddr() (string, error) {
	if _, err := p.getConn(); err != nil {
		return "", err
	}
	return p.getAddr(), nil
}

// openStream opens the Raft stream to the peer's current address unless
// one is open to it already.
func (p *peer) openStream() error {
	addr, err := p.dialAddr()
	if err != nil {
		return err
	}
	if p.stream != nil && p.streamAddr == addr {
		return nil
	}
	p.closeStream()
	st, err := p.t.dialStream(p.ctx, addr, kindRaft)
	if err != nil {
		return err
	}
	p.stream, p.streamAddr = st, addr
	return nil
}

// sendSnapshot streams one MsgSnap and its data to p, on its own goroutine,
// then reports the outcome to raft.
func (t *Transport) sendSnapshot(p *peer, m storage.RaftMessage, delay time.Duration) {
	defer t.wg.Done()
	if delay > 0 {
		sleep(delay, p.ctx.Done(), nil)
	}
	start := time.Now()
	n, err := t.streamSnapshot(p, m)
	t.m.snapBytes.WithLabelValues("sent").Add(float64(n))
	t.m.snapshotDone("sent", err == nil)
	index := m.Msg.GetSnapshot().GetMetadata().GetIndex()
	if err != nil {
		t.m.drop(m.Msg, dropSendFailed)
		t.log.Warn("sending snapshot failed", "peer", p.id, "range", uint64(m.Range), "index", index, "err", err)
	} else {
		t.m.sentMsgs([]storage.RaftMessage{m})
		t.log.Info("snapshot sent", "peer", p.id, "range", uint64(m.Range), "index", index, "bytes", n, "took", time.Since(start))
	}
	if p.ctx.Err() == nil {
		t.rep.snapshot(m.Range, p.id, err == nil)
	}
}

func (t *Transport) streamSnapshot(p *peer, m storage.RaftMessage) (int64, error) {
	if err := p.ctx.Err(); err != nil {
		return 0, err
	}
	if t.snaps == nil {
		return 0, errors.New("transport: no SnapshotSource")
	}
	conn, err := p.getConn()
	if err != nil {
		return 0, err
	}
	hdr, err := encodeSnapHeader(t.cfg.NodeID, p.id, m)
	if err != nil {
		return 0, err
	}
	rc, err := t.snaps(m.Msg)
	if err != nil {
		return 0, fmt.Errorf("open snapshot: %w", err)
	}
	defer rc.Close()
	// Canceling ctx (on return, RemovePeer or Close) aborts the stream: the
	// receiver then sees an error, never a clean end of data.
	ctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	st, err := conn.NewStream(p.t.withCluster(ctx), &snapshotStreamDesc, methodSnapshot)
	if err != nil {
		return 0, err
	}
	send := func(b []byte) error {
		if err := st.SendMsg(&frame{b: b}); err != nil {
			if err == io.EOF { // the receiver ended the stream: get its status
				var f frame
				if rerr := st.RecvMsg(&f); rerr != nil && rerr != io.EOF {
					return rerr
				}
				return errors.New("transport: snapshot stream closed by peer")
			}
			return err
		}
		return nil
	}
	if err := send(hdr); err != nil {
		return 0, err
	}
	var n int64
	for {
		// A fresh buffer per chunk: gRPC may still hold the previous one.
		buf := make([]byte, t.cfg.SnapshotChunkSize)
		k, rerr := io.ReadFull(rc, buf)
		if k > 0 {
			if err := send(buf[:k]); err != nil {
				return n, err
			}
			n += int64(k)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return n, fmt.Errorf("read snapshot: %w", rerr)
		}
	}
	if err := st.CloseSend(); err != nil {
		return n, err
	}
	var resp frame
	if err := st.RecvMsg(&resp); err != nil {
		return n, err
	}
	return n, nil
}
