package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvorum/kvorum/internal/storage"
)

// Wire formats. Every frame starts with a version byte; integers are
// uvarints.
//
//	raft batch:      v=1 | from | to | count | count × (len | proto(Message))
//	                 v=2 | from | to | count | count × (range | len | proto(Message))
//	                 v=3 | from | to | count | count × (range | kind | len | proto(Message))
//	snapshot header: v=1 | from | to | proto(MsgSnap)   (first frame of a Snapshot stream;
//	                 v=2 | from | to | range | proto(MsgSnap)   the following frames are raw
//	                 snapshot data chunks)
//	call request:    v=1 | from | len(method) | method | payload
//	call response:   payload
//	call error:      a gRPC status; a WireError's detail rides in it as a
//	                 google.protobuf.BytesValue status detail
//
// Snapshot and Raft streams are answered with one empty frame on success;
// failures travel as gRPC statuses.
//
// Every range is a Raft group, and a message must reach the replica of its
// own range: v=2 names it per message (range 0 is no range, and malformed).
// A v=1 raft batch or snapshot header has no range: all it carries belongs
// to range 1. The messages of every range to one node share that node's
// queue, stream and frames.
//
// Rolling upgrades: a node older than v=2 refuses a frame of a version it
// does not know, and the stream with it. So a frame goes out as v=1 whenever
// all it carries belongs to range 1, byte for byte what older nodes write,
// and v=2 only otherwise. A cluster that never split keeps writing v=1 on
// every node, and older and newer nodes understand each other until it
// splits (which needs every node upgraded). Both versions are always read.
//
// v=3 adds a store-level kind per message (storage.MsgKind: quiesce,
// liveness; docs/ranges.md §3.4). It goes out only when a frame holds a
// message whose kind is not plain, which only a store hosting a range
// other than range 1 sends: a one-range cluster writes v=1 as before (a
// node older than v=3 refuses such frames: every node must be upgraded
// before a range other than range 1 exists, as for v=2).
const (
	wireVersion       = 1
	wireVersionRanges = 2
	wireVersionKinds  = 3
)

// firstRange is the range of every message of a v=1 frame.
const firstRange storage.RangeID = 1

var errBadFrame = errors.New("transport: malformed frame")

// maxFrameBytes is where the sender starts a new frame while encoding a
// batch (a single message larger than this still goes out in one frame).
const maxFrameBytes = 4 << 20

// maxWireMsg bounds what gRPC will accept in one frame, either way.
const maxWireMsg = 512 << 20

var marshalCached = proto.MarshalOptions{UseCachedSize: true}

// appendMsg appends len | proto(m), where n is proto.Size(m), computed
// just before (MarshalAppend uses the size it cached).
func appendMsg(b []byte, m *raftpb.Message, n int) ([]byte, error) {
	b = binary.AppendUvarint(b, uint64(n))
	start := len(b)
	b, err := marshalCached.MarshalAppend(b, m)
	if err != nil {
		return nil, err
	}
	if len(b)-start != n {
		return nil, fmt.Errorf("transport: message changed while being marshalled")
	}
	return b, nil
}

// errNoRange: a message handed to the transport without its range, a bug
// of the sender.
var errNoRange = errors.New("transport: raft message without a range")

// encodeBatch encodes msgs, all addressed to `to`, into frames of at most
// about maxFrameBytes each. It returns the frames and, per frame, how many
// messages it holds. The frames are carved out of buf when it has room (a
// sender that writes them before its next call may pass the previous
// call's buf back: encodeBatch(buf[:0], ...)); buf is returned for that.
// A frame is v=1 when its messages all belong to range 1, v=2 otherwise
// (see wireVersion).
func encodeBatch(buf []byte, from, to uint64, msgs []storage.RaftMessage) (frames [][]byte, counts []int, _ []byte, err error) {
	var sizes []int
	for len(msgs) > 0 {
		// Size the frame first (proto.Size caches each message's size for
		// the marshal below), so that the messages are marshalled straight
		// into a frame of the right capacity: no allocation when buf has
		// room, no copy of a body into it.
		body, n, ranges := 0, 0, 0
		v := byte(wireVersion)
		sizes = sizes[:0]
		for n < len(msgs) && (n == 0 || body < maxFrameBytes) {
			if msgs[n].Range == 0 {
				return nil, nil, buf, errNoRange
			}
			if msgs[n].Kind != storage.MsgPlain {
				v = wireVersionKinds
			} else if msgs[n].Range != firstRange && v == wireVersion {
				v = wireVersionRanges
			}
			sz := proto.Size(msgs[n].Msg)
			sizes = append(sizes, sz)
			body += binary.MaxVarintLen64 + sz
			ranges += binary.MaxVarintLen64
			n++
		}
		need := 1 + 3*binary.MaxVarintLen64 + body
		if v >= wireVersionRanges {
			need += ranges
		}
		if v == wireVersionKinds {
			need += n
		}
		if cap(buf)-len(buf) < need {
			buf = append(buf[:len(buf):len(buf)], make([]byte, need)...)[:len(buf)]
		}
		start := len(buf)
		b := buf[start:start:cap(buf)]
		b = append(b, v)
		b = binary.AppendUvarint(b, from)
		b = binary.AppendUvarint(b, to)
		b = binary.AppendUvarint(b, uint64(n))
		for i, m := range msgs[:n] {
			if v >= wireVersionRanges {
				b = binary.AppendUvarint(b, uint64(m.Range))
			}
			if v == wireVersionKinds {
				b = append(b, byte(m.Kind))
			}
			if b, err = appendMsg(b, m.Msg, sizes[i]); err != nil {
				return nil, nil, buf, err
			}
		}
		frames = append(frames, b[:len(b):len(b)])
		if start+len(b) <= cap(buf) { // else b outgrew buf's room: a copy of its own
			buf = buf[:start+len(b)]
		}
		counts = append(counts, n)
		msgs = msgs[n:]
	}
	return frames, counts, buf, nil
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errBadFrame
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = errBadFrame
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

// version reads the version byte of a frame whose layout has versions 1
// to max, and returns it (0 on error).
func (r *reader) version(max byte) byte {
	if len(r.b) == 0 || r.b[0] < wireVersion || r.b[0] > max {
		r.err = fmt.Errorf("%w: unknown version", errBadFrame)
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

// rangeID reads the range of a message of a frame of version v: v=1 has
// none (range 1), v=2 a uvarint that is not 0.
func (r *reader) rangeID(v byte) storage.RangeID {
	if v == wireVersion {
		return firstRange
	}
	id := r.uvarint()
	if r.err == nil && id == 0 {
		r.err = fmt.Errorf("%w: range 0", errBadFrame)
	}
	return storage.RangeID(id)
}

func decodeBatch(b []byte) (from, to uint64, msgs []storage.RaftMessage, err error) {
	r := reader{b: b}
	v := r.version(wireVersionKinds)
	from = r.uvarint()
	to = r.uvarint()
	count := r.uvarint()
	if r.err != nil {
		return 0, 0, nil, r.err
	}
	least := uint64(1) // bytes a message takes at least: its length
	if v >= wireVersionRanges {
		least = 2 // and its range
	}
	if v == wireVersionKinds {
		least = 3 // and its kind
	}
	if count > uint64(len(r.b))/least {
		return 0, 0, nil, errBadFrame
	}
	msgs = make([]storage.RaftMessage, 0, count)
	for i := uint64(0); i < count; i++ {
		id := r.rangeID(v)
		kind := storage.MsgPlain
		if v == wireVersionKinds {
			if k := r.bytes(1); r.err == nil {
				kind = storage.MsgKind(k[0])
				if kind > storage.MaxMsgKind {
					r.err = fmt.Errorf("%w: unknown message kind %d", errBadFrame, kind)
				}
			}
		}
		mb := r.bytes(r.uvarint())
		if r.err != nil {
			return 0, 0, nil, r.err
		}
		m := new(raftpb.Message)
		if err := proto.Unmarshal(mb, m); err != nil {
			return 0, 0, nil, fmt.Errorf("%w: %v", errBadFrame, err)
		}
		msgs = append(msgs, storage.RaftMessage{Range: id, Msg: m, Kind: kind})
	}
	if len(r.b) != 0 {
		return 0, 0, nil, fmt.Errorf("%w: trailing bytes", errBadFrame)
	}
	return from, to, msgs, nil
}

// encodeSnapHeader encodes the first frame of a snapshot stream: v=1 for
// range 1, v=2 with the range otherwise (see wireVersion).
func encodeSnapHeader(from, to uint64, m storage.RaftMessage) ([]byte, error) {
	if m.Range == 0 {
		return nil, errNoRange
	}
	b := []byte{wireVersion}
	if m.Range != firstRange {
		b[0] = wireVersionRanges
	}
	b = binary.AppendUvarint(b, from)
	b = binary.AppendUvarint(b, to)
	if m.Range != firstRange {
		b = binary.AppendUvarint(b, uint64(m.Range))
	}
	return proto.MarshalOptions{}.MarshalAppend(b, m.Msg)
}

func decodeSnapHeader(b []byte) (from, to uint64, m storage.RaftMessage, err error) {
	r := reader{b: b}
	v := r.version(wireVersionRanges)
	from = r.uvarint()
	to = r.uvarint()
	m.Range = r.rangeID(v)
	if r.err != nil {
		return 0, 0, storage.RaftMessage{}, r.err
	}
	m.Msg = new(raftpb.Message)
	if err := proto.Unmarshal(r.b, m.Msg); err != nil {
		return 0, 0, storage.RaftMessage{}, fmt.Errorf("%w: %v", errBadFrame, err)
	}
	return from, to, m, nil
}

func encodeCall(from uint64, method string, payload []byte) []byte {
	b := make([]byte, 0, 1+2*binary.MaxVarintLen64+len(method)+len(payload))
	b = append(b, wireVersion)
	b = binary.AppendUvarint(b, from)
	b = binary.AppendUvarint(b, uint64(len(method)))
	b = append(b, method...)
	return append(b, payload...)
}

func decodeCall(b []byte) (from uint64, method string, payload []byte, err error) {
	r := reader{b: b}
	r.version(wireVersion)
	from = r.uvarint()
	method = string(r.bytes(r.uvarint()))
	if r.err != nil {
		return 0, "", nil, r.err
	}
	return from, method, r.b, nil
}

// Call stream frames (the Calls method, calls.go). A request frame carries
// every call queued for the peer when the sender woke; a response frame
// every reply ready when the server's writer woke, in any order.
//
//	requests:  v=1 | from | to | count | count × (id | timeout µs (0 = none) | len(method) | method | len(payload) | payload)
//	responses: v=1 | count | count × (id | kind | len(body) | body)
//	           kind 0: body is the handler's response
//	           kind 1: body is proto(google.rpc.Status) of the handler's error
const (
	callOK     = 0
	callStatus = 1
)

// callReq is one request of a call stream frame.
type callReq struct {
	id      uint64
	timeout time.Duration // 0: none
	method  string
	payload []byte
}

// callResp is one response of a call stream frame.
type callResp struct {
	id   uint64
	kind uint64
	body []byte
}

func appendLenBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// encodeCallReqs encodes reqs into frames of at most about maxFrameBytes
// each (a single larger request gets a frame of its own).
func encodeCallReqs(from, to uint64, reqs []callReq) [][]byte {
	return splitFrames(reqs, func(n int) []byte {
		b := make([]byte, 0, 1+3*binary.MaxVarintLen64)
		b = append(b, wireVersion)
		b = binary.AppendUvarint(b, from)
		b = binary.AppendUvarint(b, to)
		return binary.AppendUvarint(b, uint64(n))
	}, func(body []byte, r *callReq) []byte {
		body = binary.AppendUvarint(body, r.id)
		body = binary.AppendUvarint(body, uint64(r.timeout/time.Microsecond))
		body = binary.AppendUvarint(body, uint64(len(r.method)))
		body = append(body, r.method...)
		return appendLenBytes(body, r.payload)
	})
}

// splitFrames encodes items into frames of at most about maxFrameBytes of
// items each (at least one item per frame): each frame is header(count)
// followed by the items appended by add.
func splitFrames[T any](items []T, header func(count int) []byte, add func(body []byte, item *T) []byte) [][]byte {
	var frames [][]byte
	for len(items) > 0 {
		var body []byte
		n := 0
		for n < len(items) && (n == 0 || len(body) < maxFrameBytes) {
			body = add(body, &items[n])
			n++
		}
		frames = append(frames, append(header(n), body...))
		items = items[n:]
	}
	return frames
}

// maxCallTimeout caps a decoded timeout (a garbage value must not overflow).
const maxCallTimeout = 24 * time.Hour

func decodeCallReqs(b []byte) (from, to uint64, reqs []callReq, err error) {
	r := reader{b: b}
	r.version(wireVersion)
	from = r.uvarint()
	to = r.uvarint()
	count := r.uvarint()
	if r.err != nil {
		return 0, 0, nil, r.err
	}
	if count > uint64(len(r.b))/4 { // each request takes at least 4 bytes
		return 0, 0, nil, errBadFrame
	}
	reqs = make([]callReq, 0, count)
	for i := uint64(0); i < count; i++ {
		var q callReq
		q.id = r.uvarint()
		us := r.uvarint()
		q.method = string(r.bytes(r.uvarint()))
		q.payload = r.bytes(r.uvarint())
		if r.err != nil {
			return 0, 0, nil, r.err
		}
		if us > uint64(maxCallTimeout/time.Microsecond) {
			us = uint64(maxCallTimeout / time.Microsecond)
		}
		q.timeout = time.Duration(us) * time.Microsecond
		reqs = append(reqs, q)
	}
	if len(r.b) != 0 {
		return 0, 0, nil, fmt.Errorf("%w: trailing bytes", errBadFrame)
	}
	return from, to, reqs, nil
}

// encodeCallResps encodes resps into frames of at most about
// maxFrameBytes each.
func encodeCallResps(resps []callResp) [][]byte {
	return splitFrames(resps, func(n int) []byte {
		b := make([]byte, 0, 1+binary.MaxVarintLen64)
		b = append(b, wireVersion)
		return binary.AppendUvarint(b, uint64(n))
	}, func(body []byte, r *callResp) []byte {
		body = binary.AppendUvarint(body, r.id)
		body = binary.AppendUvarint(body, r.kind)
		return appendLenBytes(body, r.body)
	})
}

func decodeCallResps(b []byte) ([]callResp, error) {
	r := reader{b: b}
	r.version(wireVersion)
	count := r.uvarint()
	if r.err != nil {
		return nil, r.err
	}
	if count > uint64(len(r.b))/3 { // each response takes at least 3 bytes
		return nil, errBadFrame
	}
	resps := make([]callResp, 0, count)
	for i := uint64(0); i < count; i++ {
		var q callResp
		q.id = r.uvarint()
		q.kind = r.uvarint()
		q.body = r.bytes(r.uvarint())
		if r.err != nil {
			return nil, r.err
		}
		if q.kind != callOK && q.kind != callStatus {
			return nil, fmt.Errorf("%w: unknown response kind %d", errBadFrame, q.kind)
		}
		resps = append(resps, q)
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: trailing bytes", errBadFrame)
	}
	return resps, nil
}
