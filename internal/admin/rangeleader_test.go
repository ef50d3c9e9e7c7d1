package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rangeLeaderNode is a fakeNode that moves ranges' leadership: it knows
// ranges 1 and 2, whose voters are nodes 1 to 3.
type rangeLeaderNode struct {
	*fakeNode
	leaders map[uint64]uint64
}

type codeErr struct {
	code int
	msg  string
}

func (e codeErr) Error() string   { return e.msg }
func (e codeErr) HTTPStatus() int { return e.code }

func (f *rangeLeaderNode) TransferRangeLeader(ctx context.Context, rg, node uint64) (TransferRangeLeaderResponse, error) {
	var out TransferRangeLeaderResponse
	err := f.op(ctx, fmt.Sprintf("transfer range %d %d", rg, node), func() {})
	switch {
	case err != nil:
		return out, err
	case f.leaders[rg] == 0:
		return out, codeErr{http.StatusNotFound, fmt.Sprintf("no range %d on node 1", rg)}
	case node > 3:
		return out, codeErr{http.StatusBadRequest, fmt.Sprintf("node %d is not a replica of range %d", node, rg)}
	}
	f.leaders[rg] = node
	return TransferRangeLeaderResponse{RangeID: rg, Leader: node, Term: 9}, nil
}

func TestTransferRangeLeader(t *testing.T) {
	f := &rangeLeaderNode{fakeNode: newFake(), leaders: map[uint64]uint64{1: 1, 2: 1}}
	ts := newTestServer(t, f.fakeNode, func(c *Config) {
		c.Node = f
		c.RequestTimeout = 200 * time.Millisecond
	})
	r := do(t, ts, "POST", "/v1/ranges/2/transfer-leader", `{"node":3}`)
	if r.code != 200 || f.lastCall() != "transfer range 2 3" {
		t.Fatalf("transfer: %d %s (%q)", r.code, r.body, f.lastCall())
	}
	var res TransferRangeLeaderResponse
	if err := json.Unmarshal([]byte(r.body), &res); err != nil || res != (TransferRangeLeaderResponse{RangeID: 2, Leader: 3, Term: 9}) {
		t.Fatalf("transfer replied %s (%v)", r.body, err)
	}
	if f.leaders[1] != 1 || f.leaders[2] != 3 {
		t.Fatalf("leaders %v", f.leaders)
	}
	calls := len(f.calls)
	for _, c := range []struct {
		path, body string
		code       int
		msg        string
	}{
		{"/v1/ranges/0/transfer-leader", `{"node":3}`, 400, "invalid range id"},
		{"/v1/ranges/x/transfer-leader", `{"node":3}`, 400, "invalid range id"},
		{"/v1/ranges/2/transfer-leader", `{}`, 400, `"node" must be a positive node id`},
		{"/v1/ranges/2/transfer-leader", `{"node":0}`, 400, `"node" must be a positive node id`},
		{"/v1/ranges/2/transfer-leader", `{"node":"a"}`, 400, ""},
	} {
		r := do(t, ts, "POST", c.path, c.body)
		if r.code != c.code || !strings.Contains(errorOf(t, r).Error, c.msg) {
			t.Errorf("POST %s %s: %d %s, want %d %q", c.path, c.body, r.code, r.body, c.code, c.msg)
		}
	}
	if len(f.calls) != calls {
		t.Fatalf("invalid requests reached the node: %v", f.calls[calls:])
	}
	// The node's errors keep their status.
	r = do(t, ts, "POST", "/v1/ranges/9/transfer-leader", `{"node":2}`)
	if r.code != 404 || !strings.Contains(errorOf(t, r).Error, "no range 9") {
		t.Fatalf("unknown range: %d %s", r.code, r.body)
	}
	r = do(t, ts, "POST", "/v1/ranges/2/transfer-leader", `{"node":7}`)
	if e := errorOf(t, r); r.code != 400 || !strings.Contains(e.Error, "node 7 is not a replica of range 2") || !strings.Contains(e.Error, "transfer range 2's leadership to node 7") {
		t.Fatalf("not a voter: %d %s", r.code, r.body)
	}
	if r := do(t, ts, "GET", "/v1/ranges/2/transfer-leader", ""); r.code != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d %s", r.code, r.body)
	}
	f.block = true
	if r := do(t, ts, "POST", "/v1/ranges/2/transfer-leader", `{"node":2}`); r.code != 504 {
		t.Fatalf("timeout: %d %s", r.code, r.body)
	}
	f.block = false
	f.err = errors.New("boom")
	if r := do(t, ts, "POST", "/v1/ranges/2/transfer-leader", `{"node":2}`); r.code != 500 {
		t.Fatalf("error: %d %s", r.code, r.body)
	}
	// A node that cannot.
	ts2 := newTestServer(t, newFake(), nil)
	if r := do(t, ts2, "POST", "/v1/ranges/2/transfer-leader", `{"node":2}`); r.code != http.StatusNotImplemented {
		t.Fatalf("not implemented: %d %s", r.code, r.body)
	}
}
