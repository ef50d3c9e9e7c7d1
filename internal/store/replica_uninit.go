package store

import "github.com/kvorum/kvorum/internal/storage"

// slotsChanged reports whether a replica's new descriptor owns another
// slot interval than its old one, so that the slot table
// (ReplicaForSlot) must be rebuilt. It happens when a snapshot installs
// into an uninitialized replica: a node joining a cluster of several
// ranges creates one per range with an empty interval (nothing is routed
// to a replica with no data, and installing its snapshot clears nothing
// that another range's snapshot wrote), and the snapshot's descriptor
// brings the range's real interval.
func slotsChanged(old, desc *storage.Descriptor) bool {
	return old == nil || old.StartSlot != desc.StartSlot || old.EndSlot != desc.EndSlot
}
