package storage

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvorum/kvorum/internal/slot"
)

// Descriptor describes a range: the hash slots it owns and its replicas.
type Descriptor struct {
	RangeID RangeID `json:"range_id"`
	// StartSlot and EndSlot bound the hash slots [StartSlot, EndSlot) the
	// range owns (slot.Of of a user key, docs/ranges.md §2.1); EndSlot is
	// exclusive, and slot.Count (16384) is the end of the slot space. A
	// descriptor decoded from before slots (no start_slot and end_slot,
	// the user-key bounds it had were always empty) owns every slot: see
	// UnmarshalJSON. Set both on every new descriptor (FullSlots).
	StartSlot uint16 `json:"start_slot"`
	EndSlot   uint16 `json:"end_slot"`
	// Replicas lists every voter and learner with its peer address.
	Replicas []ReplicaDescriptor `json:"replicas"`
	// Generation grows with every change of bounds or replica set.
	Generation uint64 `json:"generation"`
}

// FullSlots sets d's slot interval to the whole slot space and returns d.
func (d *Descriptor) FullSlots() *Descriptor {
	d.StartSlot, d.EndSlot = 0, slot.Count
	return d
}

// IsFull reports whether d owns every slot.
func (d *Descriptor) IsFull() bool { return d.StartSlot == 0 && d.EndSlot >= slot.Count }

// UnmarshalJSON decodes a descriptor. One written before slot intervals
// (no start_slot and no end_slot; its start_key and end_key, ignored, were
// empty: one range owned every key) owns the whole slot space. A missing
// start_slot is 0, a missing end_slot is slot.Count (every descriptor
// written since has both).
func (d *Descriptor) UnmarshalJSON(b []byte) error {
	type plain Descriptor // without this method
	var v struct {
		plain
		StartSlot *uint16 `json:"start_slot"`
		EndSlot   *uint16 `json:"end_slot"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*d = Descriptor(v.plain)
	if v.StartSlot == nil && v.EndSlot == nil {
		d.FullSlots()
		return nil
	}
	d.StartSlot, d.EndSlot = 0, slot.Count
	if v.StartSlot != nil {
		d.StartSlot = *v.StartSlot
	}
	if v.EndSlot != nil {
		d.EndSlot = *v.EndSlot
	}
	return nil
}

// ReplicaDescriptor is one member of a range.
type ReplicaDescriptor struct {
	NodeID   NodeID `json:"node_id"`
	PeerAddr string `json:"peer_addr"`
	Learner  bool   `json:"learner,omitempty"`
}

// ContainsSlot reports whether hash slot s belongs to the range.
func (d *Descriptor) ContainsSlot(s uint16) bool { return d.StartSlot <= s && s < d.EndSlot }

// ContainsKey reports whether user key k belongs to the range: whether
// its hash slot does.
func (d *Descriptor) ContainsKey(k []byte) bool {
	if d.IsFull() {
		return true
	}
	return d.ContainsSlot(slot.Of(k))
}

// Replica returns the member with node id n, if any.
func (d *Descriptor) Replica(n NodeID) (ReplicaDescriptor, bool) {
	for _, r := range d.Replicas {
		if r.NodeID == n {
			return r, true
		}
	}
	return ReplicaDescriptor{}, false
}

// Clone returns a deep copy.
func (d *Descriptor) Clone() *Descriptor {
	c := *d
	c.Replicas = append([]ReplicaDescriptor(nil), d.Replicas...)
	return &c
}

// AppliedState is what the state machine has applied. It is written in the
// same batch as the effects of the entries it counts.
type AppliedState struct {
	Index     uint64
	Term      uint64
	ConfState *raftpb.ConfState
}

// TruncatedState is the last log entry removed by truncation (or covered by
// the latest snapshot). The log holds (Index, LastIndex].
type TruncatedState struct {
	Index uint64
	Term  uint64
}

// ErrCorrupt reports a stored record that cannot be decoded.
var ErrCorrupt = errors.New("storage: corrupt record")

func (s AppliedState) encode() []byte {
	b := binary.AppendUvarint(nil, s.Index)
	b = binary.AppendUvarint(b, s.Term)
	cs, _ := proto.Marshal(s.ConfState)
	return append(b, cs...)
}

func decodeAppliedState(v []byte) (AppliedState, error) {
	var s AppliedState
	var n int
	s.Index, n = binary.Uvarint(v)
	if n <= 0 {
		return s, fmt.Errorf("%w: applied state", ErrCorrupt)
	}
	v = v[n:]
	s.Term, n = binary.Uvarint(v)
	if n <= 0 {
		return s, fmt.Errorf("%w: applied state", ErrCorrupt)
	}
	s.ConfState = &raftpb.ConfState{}
	if err := proto.Unmarshal(v[n:], s.ConfState); err != nil {
		return s, fmt.Errorf("%w: applied conf state: %v", ErrCorrupt, err)
	}
	return s, nil
}

func (t TruncatedState) encode() []byte {
	b := binary.AppendUvarint(nil, t.Index)
	return binary.AppendUvarint(b, t.Term)
}

func decodeTruncatedState(v []byte) (TruncatedState, error) {
	var t TruncatedState
	var n, m int
	t.Index, n = binary.Uvarint(v)
	if n > 0 {
		t.Term, m = binary.Uvarint(v[n:])
	}
	if n <= 0 || m <= 0 {
		return t, fmt.Errorf("%w: truncated state", ErrCorrupt)
	}
	return t, nil
}

// Writer is the subset of a pebble batch the state setters need.
type Writer interface {
	Set(key, value []byte, o *pebble.WriteOptions) error
	Delete(key []byte, o *pebble.WriteOptions) error
	DeleteRange(start, end []byte, o *pebble.WriteOptions) error
}

// SetAppliedState records s for range id in w.
func SetAppliedState(w Writer, id RangeID, s AppliedState) error {
	return w.Set(AppliedStateKey(id), s.encode(), nil)
}

// SetTruncatedState records t for range id in w.
func SetTruncatedState(w Writer, id RangeID, t TruncatedState) error {
	return w.Set(TruncatedStateKey(id), t.encode(), nil)
}

// SetHardState records hs for range id in w.
func SetHardState(w Writer, id RangeID, hs *raftpb.HardState) error {
	b, err := proto.Marshal(hs)
	if err != nil {
		return err
	}
	return w.Set(HardStateKey(id), b, nil)
}

// SetDescriptor records d in w.
func SetDescriptor(w Writer, d *Descriptor) error {
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return w.Set(DescriptorKey(d.RangeID), b, nil)
}

// getValue returns a copy of key's value, or nil, false if absent.
func getValue(r pebble.Reader, key []byte) ([]byte, bool, error) {
	v, c, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out := append([]byte(nil), v...)
	_ = c.Close()
	return out, true, nil
}

// LoadAppliedState reads the applied state of range id (zero if absent).
func LoadAppliedState(r pebble.Reader, id RangeID) (AppliedState, error) {
	v, ok, err := getValue(r, AppliedStateKey(id))
	if err != nil || !ok {
		return AppliedState{ConfState: &raftpb.ConfState{}}, err
	}
	return decodeAppliedState(v)
}

// LoadTruncatedState reads the truncated state of range id (zero if absent).
func LoadTruncatedState(r pebble.Reader, id RangeID) (TruncatedState, error) {
	v, ok, err := getValue(r, TruncatedStateKey(id))
	if err != nil || !ok {
		return TruncatedState{}, err
	}
	return decodeTruncatedState(v)
}

// LoadHardState reads the hard state of range id (empty if absent).
func LoadHardState(r pebble.Reader, id RangeID) (*raftpb.HardState, error) {
	hs := &raftpb.HardState{}
	v, ok, err := getValue(r, HardStateKey(id))
	if err != nil || !ok {
		return hs, err
	}
	if err := proto.Unmarshal(v, hs); err != nil {
		return nil, fmt.Errorf("%w: hard state: %v", ErrCorrupt, err)
	}
	return hs, nil
}

// LoadDescriptor reads the descriptor of range id; ok is false if absent.
func LoadDescriptor(r pebble.Reader, id RangeID) (d *Descriptor, ok bool, err error) {
	v, ok, err := getValue(r, DescriptorKey(id))
	if err != nil || !ok {
		return nil, false, err
	}
	d = &Descriptor{}
	if err := json.Unmarshal(v, d); err != nil {
		return nil, false, fmt.Errorf("%w: descriptor: %v", ErrCorrupt, err)
	}
	return d, true, nil
}

// LoadIdent reads the node and cluster id; zero when the store is new.
func LoadIdent(r pebble.Reader) (node NodeID, cluster uint64, err error) {
	v, ok, err := getValue(r, nodeIDKey)
	if err != nil || !ok {
		return 0, 0, err
	}
	n, _ := binary.Uvarint(v)
	v, ok, err = getValue(r, clusterIDKey)
	if err != nil || !ok {
		return NodeID(n), 0, err
	}
	c, _ := binary.Uvarint(v)
	return NodeID(n), c, nil
}

// SetIdent records the node and cluster id.
func SetIdent(w Writer, node NodeID, cluster uint64) error {
	if err := w.Set(nodeIDKey, binary.AppendUvarint(nil, uint64(node)), nil); err != nil {
		return err
	}
	return w.Set(clusterIDKey, binary.AppendUvarint(nil, cluster), nil)
}

// LoadStoreFormat reads the store format: the layout of the user data
// (package kv's UserSpan). 1 when the marker is absent: every store
// written before the marker existed.
func LoadStoreFormat(r pebble.Reader) (uint64, error) {
	v, ok, err := getValue(r, storeFormatKey)
	if err != nil || !ok {
		return 1, err
	}
	f, n := binary.Uvarint(v)
	if n <= 0 {
		return 0, fmt.Errorf("%w: store format %x", ErrCorrupt, v)
	}
	return f, nil
}

// SetStoreFormat records the store format.
func SetStoreFormat(w Writer, f uint64) error {
	return w.Set(storeFormatKey, binary.AppendUvarint(nil, f), nil)
}

// LoadDescriptors reads the descriptor of every range r holds, in range
// id order. Range ids have gaps (a split allocates its id from a counter,
// and a range may be gone), so it scans the range-local keys rather than
// probing ids 1, 2, ...: it seeks to range id's descriptor key, and when
// the key found there belongs to a later range it seeks to that range's
// descriptor key; after a descriptor (or past it) it seeks to the next
// range's prefix. A range's log, which can be long, is skipped by a seek,
// never walked.
func LoadDescriptors(r pebble.Reader) ([]*Descriptor, error) {
	iter, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixRange}, UpperBound: []byte{prefixRange + 1}})
	if err != nil {
		return nil, err
	}
	defer iter.Close()
	var out []*Descriptor
	id := RangeID(0)
	for iter.SeekGE(DescriptorKey(id)); iter.Valid(); {
		k := iter.Key()
		if len(k) < 10 {
			// 0x02 and fewer than 8 id bytes: no range's key; skip to
			// the first range id it may prefix.
			iter.Next()
			continue
		}
		kid := RangeID(binary.BigEndian.Uint64(k[1:9]))
		switch {
		case kid != id:
			// A later range (id has no key at or after 'd'): its
			// descriptor key, if any, is the next candidate.
			id = kid
			iter.SeekGE(DescriptorKey(id))
			continue
		case len(k) == 10 && k[9] == suffixDesc:
			d := &Descriptor{}
			if err := json.Unmarshal(iter.Value(), d); err != nil {
				return nil, fmt.Errorf("%w: descriptor of range %d: %v", ErrCorrupt, id, err)
			}
			out = append(out, d)
		}
		if id == ^RangeID(0) {
			break
		}
		id++
		iter.SeekGE(DescriptorKey(id))
	}
	return out, iter.Error()
}
