package transport

import (
	"context"
	"net"
	"testing"
)

// BenchmarkCallPipelinedTLS: forwarded-write round trips (256-byte
// payloads, 64 concurrent callers) over plain TCP and over peer TLS.
func BenchmarkCallPipelinedTLS(b *testing.B) {
	for _, withTLS := range []bool{false, true} {
		name := "plain"
		if withTLS {
			name = "tls"
		}
		b.Run(name, func(b *testing.B) {
			var cfgA, cfgB Config
			if withTLS {
				ca := newCA(b, "bench")
				cfgA.TLS = newPeerTLS(b, writeTLS(b, b.TempDir(), "a", ca, issue(b, ca, "a")), nil)
				cfgB.TLS = newPeerTLS(b, writeTLS(b, b.TempDir(), "b", ca, issue(b, ca, "b")), nil)
			}
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			srv := New(Config{NodeID: 2, TLS: cfgB.TLS}, newRecorder(), nil)
			go func() { _ = srv.Serve(l) }()
			defer srv.Close()
			cfgA.NodeID = 1
			cli := New(cfgA, newRecorder(), nil)
			defer cli.Close()
			cli.SetPeer(2, l.Addr().String())
			payload := make([]byte, 256)
			if _, err := cli.CallPipelined(context.Background(), 2, "x", payload); err != nil {
				b.Fatal(err)
			}
			b.SetParallelism(32) // 64 callers on 2 CPUs
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := cli.CallPipelined(context.Background(), 2, "x", payload); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
