package transport

import (
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// BenchmarkEncodeBatch: a Ready round's messages to one follower under a
// write load: a MsgApp carrying one entry of ~9 proposals of 1 KiB, and a
// heartbeat.
func BenchmarkEncodeBatch(b *testing.B) {
	app := &raftpb.Message{
		Type: raftpb.MessageType_MsgApp.Enum(), To: proto.Uint64(2), From: proto.Uint64(1),
		Term: proto.Uint64(6), LogTerm: proto.Uint64(6), Index: proto.Uint64(1000), Commit: proto.Uint64(999),
		Entries: []*raftpb.Entry{{Term: proto.Uint64(6), Index: proto.Uint64(1001), Data: make([]byte, 9*1100)}},
	}
	hb := &raftpb.Message{Type: raftpb.MessageType_MsgHeartbeat.Enum(), To: proto.Uint64(2), From: proto.Uint64(1), Term: proto.Uint64(6), Commit: proto.Uint64(999)}
	msgs := []*raftpb.Message{app, hb}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := encodeBatch(nil, 1, 2, msgs); err != nil {
			b.Fatal(err)
		}
	}
}
