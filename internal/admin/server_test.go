package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// fakeNode is a NodeAPI whose behaviour tests script.
type fakeNode struct {
	mu     sync.Mutex
	status Status
	err    error         // returned by the mutating calls when set
	block  bool          // mutating calls wait for ctx.Done()
	calls  []string      // "add 4 h:p", "remove 2", "transfer 3"
	ctxDL  time.Duration // remaining time on the ctx of the last call
}

func newFake() *fakeNode {
	return &fakeNode{status: Status{
		NodeID: 1, ClusterID: 0xabc, Role: "leader", Term: 3, Leader: 1,
		CommitIndex: 10, AppliedIndex: 10, FirstIndex: 1, LastIndex: 10,
		ClientAddr: "127.0.0.1:6379", PeerAddr: "127.0.0.1:7379", AdminAddr: "127.0.0.1:8379",
		Version: "test", Ready: true,
		Members: []Member{
			{ID: 1, PeerAddr: "127.0.0.1:7379", Match: 10},
			{ID: 2, PeerAddr: "127.0.0.1:7380", Match: 10},
			{ID: 3, PeerAddr: "127.0.0.1:7381", Match: 9},
		},
	}}
}

func (f *fakeNode) Status() Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.status
	st.Members = append([]Member(nil), f.status.Members...)
	return st
}

func (f *fakeNode) op(ctx context.Context, call string, apply func()) error {
	f.mu.Lock()
	f.calls = append(f.calls, call)
	if dl, ok := ctx.Deadline(); ok {
		f.ctxDL = time.Until(dl)
	}
	err, block := f.err, f.block
	f.mu.Unlock()
	if block {
		<-ctx.Done()
		return ctx.Err()
	}
	if err != nil {
		return err
	}
	f.mu.Lock()
	apply()
	f.mu.Unlock()
	return nil
}

func (f *fakeNode) AddMember(ctx context.Context, id uint64, peerAddr string) error {
	return f.op(ctx, fmt.Sprintf("add %d %s", id, peerAddr), func() {
		f.status.Members = append(f.status.Members, Member{ID: id, PeerAddr: peerAddr})
	})
}

func (f *fakeNode) RemoveMember(ctx context.Context, id uint64) error {
	return f.op(ctx, fmt.Sprintf("remove %d", id), func() {
		var ms []Member
		for _, m := range f.status.Members {
			if m.ID != id {
				ms = append(ms, m)
			}
		}
		f.status.Members = ms
	})
}

func (f *fakeNode) TransferLeader(ctx context.Context, id uint64) error {
	return f.op(ctx, fmt.Sprintf("transfer %d", id), func() { f.status.Leader = id })
}

func (f *fakeNode) Ranges() RangesResponse {
	f.mu.Lock()
	defer f.mu.Unlock()
	return RangesResponse{NodeID: f.status.NodeID, Ranges: []Range{{RangeID: 1, Leader: f.status.Leader, Role: f.status.Role}}}
}

func (f *fakeNode) lastCall() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) == 0 {
		return ""
	}
	return f.calls[len(f.calls)-1]
}

func newTestServer(t *testing.T, f *fakeNode, mod func(*Config)) *httptest.Server {
	t.Helper()
	cfg := Config{Node: f}
	if mod != nil {
		mod(&cfg)
	}
	s := New(cfg)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

type result struct {
	code int
	body string
	hdr  http.Header
}

func do(t *testing.T, ts *httptest.Server, method, path, body string) result {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, ts.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return result{resp.StatusCode, string(b), resp.Header}
}

func errorOf(t *testing.T, r result) ErrorResponse {
	t.Helper()
	var e ErrorResponse
	if err := json.Unmarshal([]byte(r.body), &e); err != nil || e.Error == "" {
		t.Fatalf("want JSON error body, got %q (%v)", r.body, err)
	}
	if ct := r.hdr.Get("Content-Type"); ct != "application/json" {
		t.Errorf("error Content-Type = %q", ct)
	}
	return e
}

func TestHealthz(t *testing.T) {
	ts := newTestServer(t, newFake(), nil)
	r := do(t, ts, "GET", "/healthz", "")
	if r.code != 200 || r.body != "ok\n" {
		t.Fatalf("healthz = %d %q", r.code, r.body)
	}
	if r := do(t, ts, "HEAD", "/healthz", ""); r.code != 200 {
		t.Fatalf("HEAD healthz = %d", r.code)
	}
}

func TestReadyz(t *testing.T) {
	f := newFake()
	ts := newTestServer(t, f, nil)
	if r := do(t, ts, "GET", "/readyz", ""); r.code != 200 {
		t.Fatalf("ready node: %d %q", r.code, r.body)
	}
	f.mu.Lock()
	f.status.Ready = false
	f.status.Leader = 0
	f.mu.Unlock()
	r := do(t, ts, "GET", "/readyz", "")
	if r.code != 503 || !strings.Contains(r.body, "no leader") {
		t.Fatalf("leaderless node: %d %q", r.code, r.body)
	}
	f.mu.Lock()
	f.status.Leader = 2
	f.status.AppliedIndex = 5
	f.mu.Unlock()
	r = do(t, ts, "GET", "/readyz", "")
	if r.code != 503 || !strings.Contains(r.body, "catching up") {
		t.Fatalf("lagging node: %d %q", r.code, r.body)
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "kvorum_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Add(7)
	ts := newTestServer(t, newFake(), func(cfg *Config) { cfg.Registry = reg })
	do(t, ts, "GET", "/healthz", "")
	r := do(t, ts, "GET", "/metrics", "")
	if r.code != 200 {
		t.Fatalf("metrics = %d", r.code)
	}
	for _, want := range []string{
		"kvorum_test_total 7",
		"go_goroutines",
		"process_", // not all platforms have every process metric
		`kvorum_admin_http_requests_total{code="200",handler="healthz"} 1`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("metrics output lacks %q", want)
		}
	}
	// A second server on the same registry must not panic.
	New(Config{Node: newFake(), Registry: reg})
}

func TestStatus(t *testing.T) {
	f := newFake()
	ts := newTestServer(t, f, nil)
	r := do(t, ts, "GET", "/v1/status", "")
	if r.code != 200 {
		t.Fatalf("status = %d %s", r.code, r.body)
	}
	var st Status
	if err := json.Unmarshal([]byte(r.body), &st); err != nil {
		t.Fatal(err)
	}
	if st.NodeID != 1 || st.Role != "leader" || len(st.Members) != 3 || !st.Ready {
		t.Fatalf("status = %+v", st)
	}
	// Members is [] rather than null when empty.
	f.mu.Lock()
	f.status.Members = nil
	f.mu.Unlock()
	r = do(t, ts, "GET", "/v1/status", "")
	if !strings.Contains(r.body, `"members": []`) {
		t.Fatalf("empty members not []: %s", r.body)
	}
}

func TestMembers(t *testing.T) {
	f := newFake()
	ts := newTestServer(t, f, nil)
	r := do(t, ts, "GET", "/v1/members", "")
	var mr MembersResponse
	if err := json.Unmarshal([]byte(r.body), &mr); err != nil || r.code != 200 {
		t.Fatalf("members = %d %s %v", r.code, r.body, err)
	}
	if mr.Leader != 1 || len(mr.Members) != 3 {
		t.Fatalf("members = %+v", mr)
	}

	r = do(t, ts, "POST", "/v1/members", `{"id":4,"peer_addr":"10.0.0.4:7379"}`)
	if r.code != 200 {
		t.Fatalf("add = %d %s", r.code, r.body)
	}
	if got := f.lastCall(); got != "add 4 10.0.0.4:7379" {
		t.Fatalf("call = %q", got)
	}
	json.Unmarshal([]byte(r.body), &mr)
	if len(mr.Members) != 4 {
		t.Fatalf("after add: %+v", mr)
	}
	if f.ctxDL <= 50*time.Second || f.ctxDL > 60*time.Second {
		t.Errorf("add member ctx deadline in %v, want ~60s", f.ctxDL)
	}

	r = do(t, ts, "DELETE", "/v1/members/4", "")
	if r.code != 200 || f.lastCall() != "remove 4" {
		t.Fatalf("remove = %d %s (%s)", r.code, r.body, f.lastCall())
	}
	json.Unmarshal([]byte(r.body), &mr)
	if len(mr.Members) != 3 {
		t.Fatalf("after remove: %+v", mr)
	}
}

func TestMemberErrors(t *testing.T) {
	f := newFake()
	ts := newTestServer(t, f, nil)
	cases := []struct {
		method, path, body string
		code               int
		msg                string
	}{
		{"POST", "/v1/members", ``, 400, "empty"},
		{"POST", "/v1/members", `{"id":4`, 400, "invalid JSON"},
		{"POST", "/v1/members", `{"id":4,"peer_addr":"h:1","x":1}`, 400, "unknown field"},
		{"POST", "/v1/members", `{"id":4,"peer_addr":"h:1"} {}`, 400, "trailing"},
		{"POST", "/v1/members", `{"id":0,"peer_addr":"h:1"}`, 400, "positive"},
		{"POST", "/v1/members", `{"id":-1,"peer_addr":"h:1"}`, 400, "invalid JSON"},
		{"POST", "/v1/members", `{"id":4}`, 400, "peer_addr"},
		{"POST", "/v1/members", `{"id":4,"peer_addr":"nohost"}`, 400, "host:port"},
		{"POST", "/v1/members", `{"id":4,"peer_addr":":7379"}`, 400, "no host"},
		{"POST", "/v1/members", `{"id":4,"peer_addr":"h:99999"}`, 400, "port"},
		{"POST", "/v1/members", `{"id":2,"peer_addr":"h:1"}`, 409, "already a voting member"},
		{"POST", "/v1/members", `{"id":4,"peer_addr":"127.0.0.1:7380"}`, 409, "already used by node 2"},
		{"DELETE", "/v1/members/x", ``, 400, "invalid member id"},
		{"DELETE", "/v1/members/0", ``, 400, "invalid member id"},
		{"DELETE", "/v1/members/9", ``, 404, "not a member"},
		{"PUT", "/v1/members", `{}`, 405, "not allowed"},
		{"GET", "/v1/members/2", ``, 405, "not allowed"},
		{"GET", "/v1/nope", ``, 404, "no such endpoint"},
		{"POST", "/v1/transfer-leader", `{"id":9}`, 404, "not a member"},
		{"POST", "/v1/transfer-leader", `{}`, 400, "positive"},
		{"GET", "/v1/transfer-leader", ``, 405, "not allowed"},
	}
	for _, c := range cases {
		r := do(t, ts, c.method, c.path, c.body)
		if r.code != c.code {
			t.Errorf("%s %s %s: code %d, want %d (%s)", c.method, c.path, c.body, r.code, c.code, r.body)
			continue
		}
		if e := errorOf(t, r); !strings.Contains(e.Error, c.msg) {
			t.Errorf("%s %s %s: error %q lacks %q", c.method, c.path, c.body, e.Error, c.msg)
		}
	}
	if len(f.calls) != 0 {
		t.Errorf("invalid requests reached the node: %v", f.calls)
	}
	r := do(t, ts, "PUT", "/v1/members", "{}")
	if allow := r.hdr.Get("Allow"); allow != "GET, HEAD, POST" {
		t.Errorf("Allow = %q", allow)
	}
}

func TestNodeErrors(t *testing.T) {
	cases := []struct {
		err    error
		code   int
		leader uint64
	}{
		{fmt.Errorf("raft: %w", ErrNotLeader), 421, 1},
		{ErrNoLeader, 503, 0},
		{ErrBusy, 409, 0},
		{ErrMemberExists, 409, 0},
		{ErrUnknownMember, 404, 0},
		{ErrInvalid, 400, 0},
		{ErrStopped, 503, 0},
		{errors.New("disk on fire"), 500, 0},
		{statusErr(418), 418, 0},
		{fmt.Errorf("rpc: node 4: %w", ErrMemberExists), 409, 0},
		// Only identity counts, not the text.
		{errors.New("rpc: node 4: member already exists"), 500, 0},
	}
	for _, c := range cases {
		f := newFake()
		f.err = c.err
		ts := newTestServer(t, f, nil)
		r := do(t, ts, "POST", "/v1/members", `{"id":4,"peer_addr":"h:1"}`)
		if r.code != c.code {
			t.Errorf("%v: code %d, want %d", c.err, r.code, c.code)
			continue
		}
		e := errorOf(t, r)
		if !strings.Contains(e.Error, c.err.Error()) || !strings.Contains(e.Error, "add member 4") {
			t.Errorf("%v: error %q", c.err, e.Error)
		}
		if e.Leader != c.leader {
			t.Errorf("%v: leader %d, want %d", c.err, e.Leader, c.leader)
		}
	}
}

type statusErr int

func (s statusErr) Error() string   { return fmt.Sprintf("status %d", int(s)) }
func (s statusErr) HTTPStatus() int { return int(s) }

func TestTimeout(t *testing.T) {
	f := newFake()
	f.block = true
	ts := newTestServer(t, f, func(c *Config) {
		c.AddMemberTimeout = 50 * time.Millisecond
		c.RequestTimeout = 50 * time.Millisecond
	})
	r := do(t, ts, "POST", "/v1/members", `{"id":4,"peer_addr":"h:1"}`)
	if r.code != 504 || !strings.Contains(errorOf(t, r).Error, "timed out after 50ms") {
		t.Fatalf("add: %d %s", r.code, r.body)
	}
	r = do(t, ts, "POST", "/v1/transfer-leader", `{"id":2}`)
	if r.code != 504 {
		t.Fatalf("transfer: %d %s", r.code, r.body)
	}
	r = do(t, ts, "DELETE", "/v1/members/3", "")
	if r.code != 504 {
		t.Fatalf("remove: %d %s", r.code, r.body)
	}
}

func TestTransferLeader(t *testing.T) {
	f := newFake()
	ts := newTestServer(t, f, nil)
	r := do(t, ts, "POST", "/v1/transfer-leader", `{"id":3}`)
	if r.code != 200 || f.lastCall() != "transfer 3" {
		t.Fatalf("transfer = %d %s %q", r.code, r.body, f.lastCall())
	}
	var tr TransferLeaderResponse
	if err := json.Unmarshal([]byte(r.body), &tr); err != nil || tr.Leader != 3 {
		t.Fatalf("response %s", r.body)
	}
	// Already the leader: no-op.
	n := len(f.calls)
	r = do(t, ts, "POST", "/v1/transfer-leader", `{"id":3}`)
	if r.code != 200 || len(f.calls) != n {
		t.Fatalf("no-op transfer = %d, calls %v", r.code, f.calls)
	}
	// Learners cannot lead.
	f.mu.Lock()
	f.status.Members = append(f.status.Members, Member{ID: 5, PeerAddr: "h:5", Learner: true})
	f.mu.Unlock()
	r = do(t, ts, "POST", "/v1/transfer-leader", `{"id":5}`)
	if r.code != 400 || !strings.Contains(errorOf(t, r).Error, "learner") {
		t.Fatalf("learner transfer = %d %s", r.code, r.body)
	}
	// Re-adding a learner (resuming promotion) is allowed.
	r = do(t, ts, "POST", "/v1/members", `{"id":5,"peer_addr":"h:5"}`)
	if r.code != 200 {
		t.Fatalf("re-add learner = %d %s", r.code, r.body)
	}
}

func TestServeAndClose(t *testing.T) {
	f := newFake()
	f.block = true
	s := New(Config{Node: f})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	url := "http://" + l.Addr().String()
	resp, err := http.Get(url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("healthz %d", resp.StatusCode)
	}
	// An in-flight member add is cancelled by Close rather than holding it.
	inflight := make(chan int, 1)
	go func() {
		resp, err := http.Post(url+"/v1/members", "application/json", strings.NewReader(`{"id":4,"peer_addr":"h:1"}`))
		if err != nil {
			inflight <- -1
			return
		}
		resp.Body.Close()
		inflight <- resp.StatusCode
	}()
	for f.lastCall() == "" {
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Close took %v", d)
	}
	if err := <-done; err != nil {
		t.Fatalf("Serve returned %v", err)
	}
	if code := <-inflight; code != 503 && code != -1 {
		t.Errorf("in-flight request got %d", code)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestCloseBeforeServe(t *testing.T) {
	s := New(Config{Node: newFake()})
	s.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := s.Serve(l); err != nil {
		t.Fatalf("Serve after Close = %v", err)
	}
}

func TestRanges(t *testing.T) {
	ts := newTestServer(t, newFake(), nil)
	r := do(t, ts, "GET", "/v1/ranges", "")
	var rr RangesResponse
	if err := json.Unmarshal([]byte(r.body), &rr); err != nil || r.code != 200 {
		t.Fatalf("ranges = %d %s %v", r.code, r.body, err)
	}
	if len(rr.Ranges) != 1 || rr.Ranges[0].RangeID != 1 || rr.Ranges[0].Leader != 1 {
		t.Fatalf("ranges = %+v", rr)
	}
	if r := do(t, ts, "POST", "/v1/ranges", "{}"); r.code != 405 {
		t.Fatalf("POST /v1/ranges = %d %s", r.code, r.body)
	}
}
