package transport

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

// codecName is the name of the pass-through codec. It is forced on both
// sides (ForceCodecV2 / ForceServerCodecV2), never registered globally.
const codecName = "kvorum-raw"

// frame is the only message type that crosses the wire: an opaque byte
// string whose layout is defined in wire.go.
type frame struct{ b []byte }

// rawCodec passes frames through without any serialization.
type rawCodec struct{}

var _ encoding.CodecV2 = rawCodec{}

func (rawCodec) Name() string { return codecName }

// Marshal hands gRPC the frame's bytes without copying. gRPC may write them
// after SendMsg returns, so a frame's bytes must never be reused or
// modified once sent; every frame is built in a fresh slice.
func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, fmt.Errorf("transport: codec cannot marshal %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(f.b)}, nil
}

// Unmarshal copies the data out: gRPC frees its buffers when this returns.
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("transport: codec cannot unmarshal into %T", v)
	}
	f.b = data.Materialize()
	return nil
}

// The kvorum.Peer service, registered by hand (no protoc).
const (
	serviceName    = "kvorum.Peer"
	methodSnapshot = "/kvorum.Peer/Snapshot"
	methodCall     = "/kvorum.Peer/Call"
)

// peerService is the HandlerType of the service: *Transport implements it.
type peerService interface {
	serveSnapshot(grpc.ServerStream) error
	serveCall(ctx context.Context, req []byte) ([]byte, error)
}

var snapshotStreamDesc = grpc.StreamDesc{
	StreamName:    "Snapshot",
	ClientStreams: true,
	Handler: func(srv any, st grpc.ServerStream) error {
		return srv.(peerService).serveSnapshot(st)
	},
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*peerService)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Call",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var req frame
			if err := dec(&req); err != nil {
				return nil, err
			}
			resp, err := srv.(peerService).serveCall(ctx, req.b)
			if err != nil {
				return nil, err
			}
			return &frame{b: resp}, nil
		},
	}},
	Streams:  []grpc.StreamDesc{snapshotStreamDesc},
	Metadata: "kvorum/peer",
}
