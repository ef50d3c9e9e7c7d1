package storage

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

func testBackup(t *testing.T, pairs int) []byte {
	t.Helper()
	var buf bytes.Buffer
	desc := (&Descriptor{RangeID: 1, Replicas: []ReplicaDescriptor{{NodeID: 1, PeerAddr: "a:1"}}}).FullSlots()
	hdr := BackupHeader{ClusterID: 7, NodeID: 1, RangeID: 1, Index: 42, Term: 3, Created: "2026-11-28T00:00:00Z", Version: "test"}
	err := WriteBackup(&buf, hdr, desc, func(emit func(k, v []byte) error) error {
		for i := 0; i < pairs; i++ {
			if err := emit([]byte(fmt.Sprintf("k%05d", i)), bytes.Repeat([]byte{byte(i)}, i%300)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestBackupRoundTrip(t *testing.T) {
	for _, pairs := range []int{0, 1, 3000} { // 3000 pairs: more than the 256 KiB read buffer
		b := testBackup(t, pairs)
		var got int
		info, err := ReadBackup(bytes.NewReader(b), func(k, v []byte) error {
			if want := fmt.Sprintf("k%05d", got); string(k) != want || len(v) != got%300 {
				return fmt.Errorf("pair %d: key %q, %d bytes", got, k, len(v))
			}
			got++
			return nil
		})
		if err != nil {
			t.Fatalf("%d pairs: %v", pairs, err)
		}
		if got != pairs || info.Pairs != int64(pairs) || info.Bytes != int64(len(b)) {
			t.Fatalf("%d pairs: read %d, info %+v", pairs, got, info)
		}
		h := info.Header
		if h.Index != 42 || h.Term != 3 || h.ClusterID != 7 || h.Format != 1 || info.Desc.RangeID != 1 {
			t.Fatalf("header %+v desc %+v", h, info.Desc)
		}
		if !bytes.Equal(info.Sum[:], b[len(b)-32:]) {
			t.Fatal("Sum is not the trailer")
		}
	}
}

// Every truncation, every altered byte and any appended byte is refused.
func TestBackupRefusesDamage(t *testing.T) {
	b := testBackup(t, 20)
	for n := 0; n < len(b); n++ {
		_, err := ReadBackup(bytes.NewReader(b[:n]), nil)
		if err == nil {
			t.Fatalf("truncated to %d of %d bytes: accepted", n, len(b))
		}
		if n > len(backupMagic) && !strings.Contains(err.Error(), "truncated") && !strings.Contains(err.Error(), "damaged") {
			t.Fatalf("truncated to %d bytes: %v", n, err)
		}
	}
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x10
		if _, err := ReadBackup(bytes.NewReader(c), nil); err == nil {
			t.Fatalf("byte %d altered: accepted", i)
		}
	}
	if _, err := ReadBackup(bytes.NewReader(append(bytes.Clone(b), 0)), nil); err == nil || !strings.Contains(err.Error(), "after its checksum") {
		t.Fatalf("appended byte: %v", err)
	}
	if _, err := ReadBackup(strings.NewReader("*1\r\n$4\r\nPING\r\n"), nil); err == nil || !strings.Contains(err.Error(), "not a kvorum backup") {
		t.Fatalf("not a backup: %v", err)
	}
	_, err := ReadBackup(bytes.NewReader(b[:len(b)-10]), nil)
	if err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("truncated in the checksum: %v", err)
	}
}
