package admin

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
)

// RangeLeaderTransferrer is implemented by a NodeAPI that can move one
// range's leadership (POST /v1/ranges/{id}/transfer-leader). Optional, as
// RangeSplitter is.
type RangeLeaderTransferrer interface {
	// TransferRangeLeader moves range rangeID's leadership to node and
	// waits until it holds. Errors: the range is unknown (an error with
	// HTTP status 404), node is not a voter of the range (400).
	TransferRangeLeader(ctx context.Context, rangeID, node uint64) (TransferRangeLeaderResponse, error)
}

// TransferRangeLeaderRequest is the body of POST
// /v1/ranges/{id}/transfer-leader: the node to lead the range.
type TransferRangeLeaderRequest struct {
	Node uint64 `json:"node"`
}

// TransferRangeLeaderResponse is the reply of a range's leadership
// transfer: the range, its leader (the node asked for) and the term in
// which it leads, as the node that ran the transfer sees them.
type TransferRangeLeaderResponse struct {
	RangeID uint64 `json:"range_id"`
	Leader  uint64 `json:"leader"`
	Term    uint64 `json:"term"`
}

func (s *Server) transferRangeLeader(w http.ResponseWriter, r *http.Request) {
	tl, ok := s.node.(RangeLeaderTransferrer)
	if !ok {
		writeError(w, http.StatusNotImplemented, "this node cannot transfer a range's leadership", 0)
		return
	}
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid range id %q: must be a positive integer", r.PathValue("id")), 0)
		return
	}
	var req TransferRangeLeaderRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Node == 0 {
		writeError(w, http.StatusBadRequest, `"node" must be a positive node id`, 0)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	s.log.Info("admin: transferring a range's leadership", "range", id, "to", req.Node)
	resp, err := tl.TransferRangeLeader(ctx, id, req.Node)
	if err != nil {
		s.nodeError(w, fmt.Sprintf("transfer range %d's leadership to node %d", id, req.Node), s.cfg.RequestTimeout, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}
