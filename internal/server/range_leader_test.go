package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvorum/kvorum/internal/admin"
)

// TestRangeTransferLeader: moving range 2's leadership (POST
// /v1/ranges/2/transfer-leader, through a node that leads neither range)
// moves range 2's only: range 1 keeps its leader and term. An unknown
// range is a 404, a node that is not a voter of the range a 400.
func TestRangeTransferLeader(t *testing.T) {
	c := newRangeCluster(t, 2)
	ctx := testCtx(t, time.Minute)
	st1 := c.node(1).store.Replica(firstRange).Status()
	lead2, _ := c.node(1).store.Replica(2).Leader()
	if st1.Leader == 0 || lead2 == 0 {
		t.Fatalf("leaders: range 1 %d, range 2 %d", st1.Leader, lead2)
	}
	// The target: not range 2's leader, range 1's if it can be (so that
	// the test would see range 1 move with it, were the transfer of every
	// range); through a node other than the target.
	target := st1.Leader
	if target == lead2 {
		target = lead2%3 + 1
	}
	via := target%3 + 1
	n := c.node(via)
	post := adminPoster(t, n)
	for _, tc := range []struct {
		path, body string
		code       int
		msg        string
	}{
		{"/v1/ranges/9/transfer-leader", `{"node": 1}`, http.StatusNotFound, "no range 9"},
		{"/v1/ranges/2/transfer-leader", `{"node": 7}`, http.StatusBadRequest, "node 7 is not a replica of range 2"},
		{"/v1/ranges/2/transfer-leader", `{}`, http.StatusBadRequest, "must be a positive node id"},
		{"/v1/ranges/x/transfer-leader", `{"node": 1}`, http.StatusBadRequest, "invalid range id"},
	} {
		if code, body := post(tc.path, tc.body); code != tc.code || !strings.Contains(string(body), tc.msg) {
			t.Fatalf("POST %s %s: %d %s, want %d %q", tc.path, tc.body, code, body, tc.code, tc.msg)
		}
	}
	code, body := post("/v1/ranges/2/transfer-leader", `{"node": `+itoa64(target)+`}`)
	if code != http.StatusOK {
		t.Fatalf("transfer: %d %s", code, body)
	}
	var res admin.TransferRangeLeaderResponse
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatal(err)
	}
	if res.RangeID != 2 || res.Leader != target || res.Term == 0 {
		t.Fatalf("transfer replied %s, want range 2 led by %d", body, target)
	}
	if lead, _ := n.store.Replica(2).Leader(); lead != target {
		t.Fatalf("node %d sees range 2 led by %d right after the reply, want %d", via, lead, target)
	}
	deadline := time.Now().Add(10 * time.Second)
	for id := uint64(1); id <= 3; id++ {
		for {
			lead, _ := c.node(id).store.Replica(2).Leader()
			if lead == target {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d: range 2 led by %d, want %d", id, lead, target)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if st := c.node(id).store.Replica(firstRange).Status(); st.Leader != st1.Leader || st.Term != st1.Term {
			t.Fatalf("node %d: range 1 led by %d in term %d, was %d in term %d: a transfer of range 2 moved it", id, st.Leader, st.Term, st1.Leader, st1.Term)
		}
	}
	// Already the leader: nothing to do, same answer.
	lh, _, err := c.node(target).TransferRangeLeader(ctx, 2, target)
	if err != nil || lh != target {
		t.Fatalf("transfer to the leader: %d, %v", lh, err)
	}
	// Writes to both ranges still work.
	for rg, k := range []string{keyInSlots("tl:", 0, 8192, 0), keyInSlots("tl:", 8192, 16384, 0)} {
		if err := c.client(via).Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatalf("range %d: SET after the transfer: %v", rg+1, err)
		}
	}
}

func itoa64(v uint64) string {
	b, _ := json.Marshal(v)
	return string(b)
}
