package admin

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// RangeSplitter is implemented by a NodeAPI that can split a range
// (POST /v1/ranges/{id}/split). Optional, so that NodeAPI's other
// implementations need not change.
type RangeSplitter interface {
	SplitRange(ctx context.Context, rangeID uint64, slot uint16) (SplitRangeResponse, error)
}

// SplitRangeRequest is the body of POST /v1/ranges/{id}/split: the range
// keeps the slots below Slot, a new range takes Slot and above.
type SplitRangeRequest struct {
	Slot *int `json:"slot"`
}

// RangeDescriptor is a range's descriptor: its slot interval
// [StartSlot, EndSlot), generation and replicas.
type RangeDescriptor struct {
	RangeID    uint64   `json:"range_id"`
	StartSlot  uint32   `json:"start_slot"`
	EndSlot    uint32   `json:"end_slot"`
	Generation uint64   `json:"generation"`
	Replicas   []Member `json:"replicas"`
}

// SplitRangeResponse is the reply of a split: the two new descriptors.
type SplitRangeResponse struct {
	Left  RangeDescriptor `json:"left"`
	Right RangeDescriptor `json:"right"`
}

// splitTimeout bounds a split: a range id allocation and one proposal.
const splitTimeout = 30 * time.Second

func (s *Server) splitRange(w http.ResponseWriter, r *http.Request) {
	sp, ok := s.node.(RangeSplitter)
	if !ok {
		writeError(w, http.StatusNotImplemented, "this node cannot split ranges", 0)
		return
	}
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid range id %q: must be a positive integer", r.PathValue("id")), 0)
		return
	}
	var req SplitRangeRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Slot == nil || *req.Slot < 1 || *req.Slot > 16383 {
		writeError(w, http.StatusBadRequest, `"slot" must be a hash slot from 1 to 16383 (the first slot of the new range)`, 0)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), splitTimeout)
	defer cancel()
	s.log.Info("admin: splitting range", "range", id, "slot", *req.Slot)
	resp, err := sp.SplitRange(ctx, id, uint16(*req.Slot))
	if err != nil {
		s.nodeError(w, fmt.Sprintf("split range %d at slot %d", id, *req.Slot), splitTimeout, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}
