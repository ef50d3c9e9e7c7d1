package kvbench

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/resp/codec"
)

// The outage figures from a synthetic timeline: writes acknowledged every
// 10 ms but for 1.5 s after the kill at 3 s, errors while down.
func TestFailoverSummarize(t *testing.T) {
	r := &FailoverResult{Errors: map[string]int{}, Events: []FailoverEvent{{At: 3, What: "kill leader"}, {At: 6, What: "restart leader"}}}
	var all []foSample
	for d := time.Duration(0); d < 9*time.Second; d += 10 * time.Millisecond {
		s := foSample{sched: d, done: d + 2*time.Millisecond}
		if d >= 3*time.Second && d < 4500*time.Millisecond {
			s.err = "CLUSTERDOWN"
		}
		if d >= 4500*time.Millisecond && d < 5*time.Second {
			s.done = d + 100*time.Millisecond
		}
		all = append(all, s)
	}
	r.summarize(all, 9*time.Second)
	if len(r.Seconds) != 9 || r.Seconds[0].OK != 100 || r.Seconds[3].OK != 0 || r.Seconds[3].Errors["CLUSTERDOWN"] != 100 {
		t.Fatalf("seconds %+v", r.Seconds[:4])
	}
	if len(r.Outages) != 1 {
		t.Fatalf("outages %+v", r.Outages)
	}
	o := r.Outages[0]
	// Last ack before: 2.992 s; first after: 4.6 s.
	if o.Gap < 1600*time.Millisecond || o.Gap > 1620*time.Millisecond {
		t.Errorf("gap %v, want ~1.608s", o.Gap)
	}
	if o.Errors["CLUSTERDOWN"] != 150 || r.Errors["CLUSTERDOWN"] != 150 {
		t.Errorf("errors %v / %v", o.Errors, r.Errors)
	}
	if o.P95Before > 3*time.Millisecond || o.P95During < 99*time.Millisecond || o.P95After > 3*time.Millisecond {
		t.Errorf("p95 before %v during %v after %v", o.P95Before, o.P95During, o.P95After)
	}
}

// fakeEnv serves SET and GET on three listeners sharing one map; Kill
// closes a listener and its connections, Restart opens it again.
type fakeEnv struct {
	mu    sync.Mutex
	data  map[string]string
	lis   []net.Listener
	addrs []string
	conns [3][]net.Conn
	lead  int
}

func (f *fakeEnv) Name() string    { return "fake" }
func (f *fakeEnv) Addrs() []string { return f.addrs }

func (f *fakeEnv) serve(i int) {
	l, err := net.Listen("tcp", f.addrs[i])
	if err != nil {
		panic(err)
	}
	f.lis[i] = l
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conns[i] = append(f.conns[i], c)
			f.mu.Unlock()
			go f.handle(i, c)
		}
	}()
}

func (f *fakeEnv) handle(i int, c net.Conn) {
	rd := codec.NewReader(c, codec.Limits{})
	for {
		args, err := rd.ReadCommand()
		if err != nil {
			c.Close()
			return
		}
		f.mu.Lock()
		var out []byte
		switch strings.ToUpper(string(args[0])) {
		case "SET":
			f.data[string(args[1])] = string(args[2])
			out = []byte("+OK\r\n")
		case "GET":
			out = []byte("$-1\r\n")
			if v, ok := f.data[string(args[1])]; ok {
				out = codec.AppendBulk(nil, []byte(v))
			}
		case "INFO":
			role := "follower"
			if i == f.lead {
				role = "leader"
			}
			out = codec.AppendBulk(nil, []byte("raft_role:"+role+"\r\n"))
		}
		rd.Release()
		f.mu.Unlock()
		c.Write(out)
	}
}

func (f *fakeEnv) Kill(i int) error {
	f.lis[i].Close()
	f.mu.Lock()
	for _, c := range f.conns[i] {
		c.Close()
	}
	f.conns[i] = nil
	f.lead = (i + 1) % 3
	f.mu.Unlock()
	return nil
}

func (f *fakeEnv) Restart(i int) error { f.serve(i); return nil }

// The engine end to end against the fake: the schedule kills the leader
// and a follower, clients move to other nodes, every write acknowledged
// is read back, and the connection errors are counted.
func TestRunFailoverFake(t *testing.T) {
	f := &fakeEnv{data: map[string]string{}, lis: make([]net.Listener, 3)}
	for i := 0; i < 3; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		f.addrs = append(f.addrs, l.Addr().String())
		l.Close()
		f.serve(i)
	}
	defer func() {
		for _, l := range f.lis {
			l.Close()
		}
	}()
	r, err := RunFailover(context.Background(), f, FailoverConfig{Rate: 400, Workers: 6, ValueSize: 10, Phase: time.Second, OpTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r.Acked < 1500 || r.Lost != 0 || len(r.Events) != 4 || len(r.Outages) != 2 {
		t.Fatalf("acked %d lost %d events %+v outages %+v", r.Acked, r.Lost, r.Events, r.Outages)
	}
	if r.Events[0].Node != 1 || r.Events[2].Node == r.Events[0].Node {
		t.Errorf("events %+v: the leader (node 1) first, then another node", r.Events)
	}
	if r.Errors["connection closed"]+r.Errors["connection refused"]+r.Errors["connection error"] == 0 {
		t.Errorf("no connection errors counted: %v", r.Errors)
	}
	if len(f.data) != r.Acked {
		t.Errorf("%d keys written, %d acknowledged", len(f.data), r.Acked)
	}
}
