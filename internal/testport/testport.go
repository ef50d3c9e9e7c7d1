package testport

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
)

const (
	first = 15000
	last  = 32000 // exclusive; the ephemeral range starts at 32768
)

var next atomic.Int64

func init() { next.Store(int64(first + os.Getpid()%1000*17)) }

// Addr returns "127.0.0.1:<port>" for a port that was free a moment ago
// and that this process has not handed out recently.
func Addr() (string, error) { return AddrOn("127.0.0.1") }

// AddrOn is Addr on another loopback host (127.0.0.2, ...), for tests
// whose nodes have an address each.
func AddrOn(host string) (string, error) {
	for i := 0; i < last-first; i++ {
		p := next.Add(1)
		if p >= last {
			next.CompareAndSwap(p, first)
			continue
		}
		addr := net.JoinHostPort(host, fmt.Sprint(p))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue // in use by someone else
		}
		l.Close()
		return addr, nil
	}
	return "", errors.New("testport: no free port in 15000-32000")
}
