package transport

import (
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvorum/kvorum/internal/storage"
)

// benchBatch: a Ready round's messages to one follower under a write load:
// a MsgApp carrying one entry of ~9 proposals of 1 KiB, and a heartbeat.
// Both are of range 1, or the heartbeat of range other if not 0.
func benchBatch(other storage.RangeID) []storage.RaftMessage {
	app := &raftpb.Message{
		Type: raftpb.MessageType_MsgApp.Enum(), To: proto.Uint64(2), From: proto.Uint64(1),
		Term: proto.Uint64(6), LogTerm: proto.Uint64(6), Index: proto.Uint64(1000), Commit: proto.Uint64(999),
		Entries: []*raftpb.Entry{{Term: proto.Uint64(6), Index: proto.Uint64(1001), Data: make([]byte, 9*1100)}},
	}
	hb := &raftpb.Message{Type: raftpb.MessageType_MsgHeartbeat.Enum(), To: proto.Uint64(2), From: proto.Uint64(1), Term: proto.Uint64(6), Commit: proto.Uint64(999)}
	if other == 0 {
		other = 1
	}
	return []storage.RaftMessage{{Range: 1, Msg: app}, {Range: other, Msg: hb}}
}

// BenchmarkWireEncodeBatch: the batch of one range (a v=1 frame, as every
// frame of a cluster that never split).
func BenchmarkWireEncodeBatch(b *testing.B) {
	msgs := benchBatch(0)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := encodeBatch(nil, 1, 2, msgs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWireEncodeBatchRanges: the same batch with the heartbeat of
// another range (a v=2 frame).
func BenchmarkWireEncodeBatchRanges(b *testing.B) {
	msgs := benchBatch(7)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := encodeBatch(nil, 1, 2, msgs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWireDecodeBatch decodes the v=1 frame of
// BenchmarkWireEncodeBatch (what a receiving node does per frame).
func BenchmarkWireDecodeBatch(b *testing.B) {
	frames, _, _, err := encodeBatch(nil, 1, 2, benchBatch(0))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := decodeBatch(frames[0]); err != nil {
			b.Fatal(err)
		}
	}
}
