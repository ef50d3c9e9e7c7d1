package hll

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"testing"
)

// The bytes redis-server 7.0 holds after the same PFADDs (GET), and its
// PFCOUNT.
func TestSameBytesAsRedis(t *testing.T) {
	h := New()
	want := "HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x7f\xff" // one XZERO of 16384, cache valid
	if got := string(h.Bytes()); got != want {
		t.Fatalf("New: %q, want %q", got, want)
	}
	add := func(e string) {
		t.Helper()
		if _, err := h.Add([]byte(e)); err != nil {
			t.Fatal(err)
		}
	}
	add("a")
	if got, want := string(h.Bytes()), "HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80q\xa6\x84NW"; got != want {
		t.Fatalf("after a: %q, want %q", got, want)
	}
	add("b")
	add("c")
	if got, want := string(h.Bytes()), "HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80`\xf3\x80P\xb1\x84K\xfb\x80BZ"; got != want {
		t.Fatalf("after a b c: %q, want %q", got, want)
	}
	if n, err := h.Count(); err != nil || n != 3 {
		t.Fatalf("count %d %v", n, err)
	}

	for _, c := range []struct {
		n     int
		size  int
		dense bool
		sum   string // sha256 of the registers (the bytes after the header)
		count uint64
	}{
		{200, 513, false, "0acf556b4a1961d9cd9f79709dd7e45a7d42ee5caf1e9ad0d086ce54ac4ef6e7", 200},
		{10000, DenseSize, true, "fb888b6fa5be72a33de82eba1a9e2fcfd4adfe34c9bd568a23557f8e589cc40d", 9973},
	} {
		h := New()
		for i := 0; i < c.n; i++ {
			if _, err := h.Add([]byte(fmt.Sprint("e", i))); err != nil {
				t.Fatal(err)
			}
		}
		v := h.Bytes()
		sum := sha256.Sum256(v[HeaderSize:])
		if len(v) != c.size || h.Dense() != c.dense || hex.EncodeToString(sum[:]) != c.sum {
			t.Errorf("%d elements: %d bytes, dense %v, registers %x", c.n, len(v), h.Dense(), sum)
		}
		if n, err := h.Count(); err != nil || n != c.count {
			t.Errorf("%d elements: count %d %v, want %d", c.n, n, err, c.count)
		}
	}
}

// Dense registers: every 6-bit register reads back what was written,
// without disturbing its neighbours (they share bytes).
func TestDenseRegisterRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	regs := make([]byte, DenseSize-HeaderSize+1)
	var want Registers
	for round := 0; round < 3; round++ {
		for i := range want {
			want[i] = uint8(rng.IntN(registerMax + 1))
			denseSetReg(regs, i, want[i])
		}
		for i := range want {
			if got := denseGet(regs, i); got != want[i] {
				t.Fatalf("round %d: register %d = %d, want %d", round, i, got, want[i])
			}
		}
	}
	if regs[len(regs)-1] != 0 {
		t.Fatalf("the terminator byte was written: %#x", regs[len(regs)-1])
	}
}

// The sparse edits and the dense encoding hold the same registers after
// the same additions, through the promotion, and give the same count.
func TestSparseMatchesDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	sparse, dense := New(), New()
	if err := dense.ToDense(); err != nil {
		t.Fatal(err)
	}
	promoted := -1
	for i := 0; i < 30000; i++ {
		e := []byte(fmt.Sprint("x", rng.Uint64()))
		c1, err1 := sparse.Add(e)
		c2, err2 := dense.Add(e)
		if err1 != nil || err2 != nil || c1 != c2 {
			t.Fatalf("element %d: sparse %v %v, dense %v %v", i, c1, err1, c2, err2)
		}
		if promoted < 0 && sparse.Dense() {
			promoted = i
		}
		if !sparse.Dense() && len(sparse.Bytes()) > SparseMaxBytes {
			t.Fatalf("sparse HLL of %d bytes", len(sparse.Bytes()))
		}
		if i%997 == 0 || i == promoted {
			var rs, rd Registers
			if sparse.Merge(&rs) != nil || dense.Merge(&rd) != nil || rs != rd {
				t.Fatalf("element %d: registers differ", i)
			}
			n1, _ := sparse.Count()
			n2, _ := dense.Count()
			if n1 != n2 || n1 != rs.Count() {
				t.Fatalf("element %d: counts %d %d %d", i, n1, n2, rs.Count())
			}
		}
	}
	if promoted < 100 {
		t.Fatalf("promoted after %d elements", promoted)
	}
	if !bytes.Equal(sparse.Bytes()[HeaderSize:], dense.Bytes()[HeaderSize:]) {
		t.Fatal("dense registers differ after the promotion")
	}
}

// Raise sets registers as PFMERGE does: values above 32 turn a sparse HLL
// dense, lower values never lower a register.
func TestRaise(t *testing.T) {
	h := New()
	for _, c := range []struct {
		i       int
		v       uint8
		changed bool
	}{{5, 3, true}, {5, 2, false}, {5, 3, false}, {16383, 1, true}, {0, 32, true}} {
		if changed, err := h.Raise(c.i, c.v); err != nil || changed != c.changed {
			t.Fatalf("Raise(%d, %d) = %v %v", c.i, c.v, changed, err)
		}
	}
	if h.Dense() {
		t.Fatal("dense before a value above 32")
	}
	if changed, err := h.Raise(7, 40); err != nil || !changed || !h.Dense() {
		t.Fatalf("Raise(7, 40) = %v %v, dense %v", changed, err, h.Dense())
	}
	var r Registers
	if err := h.Merge(&r); err != nil {
		t.Fatal(err)
	}
	for i, v := range r {
		want := map[int]uint8{0: 32, 5: 3, 7: 40, 16383: 1}[i]
		if v != want {
			t.Fatalf("register %d = %d, want %d", i, v, want)
		}
	}
}

// A sparse value whose opcodes cover too many or too few registers is
// corrupted, whatever asks.
func TestCorruptSparse(t *testing.T) {
	hdr := "HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80"
	for _, regs := range []string{
		"\x7f\xfe",     // XZERO of 16383
		"\x7f\xff\x80", // XZERO of 16384, then a VAL past the end
		"\x7f\xfc\x83", // XZERO of 16381, VAL of 4 registers running past the end
		"",             // no opcodes
	} {
		v := []byte(hdr + regs)
		if !Valid(v) {
			t.Fatalf("%q not valid", regs)
		}
		if _, err := Load(v).Count(); err != ErrCorrupt {
			t.Errorf("%q: Count err %v", regs, err)
		}
		if err := Load(v).ToDense(); err != ErrCorrupt {
			t.Errorf("%q: ToDense err %v", regs, err)
		}
		var r Registers
		if err := Load(v).Merge(&r); err != ErrCorrupt {
			t.Errorf("%q: Merge err %v", regs, err)
		}
	}
	for _, v := range []string{"", "HYLL", "HYLL\x02" + hdr[5:], "HYLX" + hdr[4:], "HYLL\x00" + hdr[5:] + "\x00"} {
		if Valid([]byte(v)) {
			t.Errorf("Valid(%q)", v)
		}
	}
}

// TestEstimate checks the estimator without redis-server: exact for an
// empty HLL, within 2% for 100000 elements, sparse until the promotion.
func TestEstimate(t *testing.T) {
	h := New()
	if c, err := h.Count(); err != nil || c != 0 {
		t.Fatalf("empty: %d %v", c, err)
	}
	promoted := -1
	for i := 0; i < 100000; i++ {
		if _, err := h.Add([]byte(fmt.Sprint("e", i))); err != nil {
			t.Fatal("corrupted")
		}
		if promoted < 0 && h.Dense() {
			promoted = i
		}
		if !h.Dense() && len(h.Bytes()) > SparseMaxBytes {
			t.Fatalf("sparse HLL of %d bytes", len(h.Bytes()))
		}
	}
	c, err := h.Count()
	if err != nil || c < 98000 || c > 102000 {
		t.Fatalf("count %d %v", c, err)
	}
	t.Logf("promoted to dense after %d elements", promoted)
	if promoted < 100 {
		t.Fatalf("promoted to dense after %d elements", promoted)
	}
	if len(h.Bytes()) != DenseSize || !Valid(h.Bytes()) {
		t.Fatal("not a dense HLL")
	}
}
