package server

import (
	"context"
	"errors"
	"testing"
	"time"
)

type ctxKey struct{}

func TestWithRequestTimeout(t *testing.T) {
	n := &Node{cfg: Config{RequestTimeout: 50 * time.Millisecond}}

	// A parent with a tighter deadline is used as it is.
	tight, cancelTight := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancelTight()
	if ctx, cancel := n.withRequestTimeout(tight); ctx != tight {
		t.Fatal("a tighter parent deadline got a new context")
	} else {
		cancel()
	}

	// Otherwise the deadline is the request timeout; it fires.
	parent := context.WithValue(context.Background(), ctxKey{}, "v")
	start := time.Now()
	ctx, cancel := n.withRequestTimeout(parent)
	defer cancel()
	if dl, ok := ctx.Deadline(); !ok || dl.Sub(start) < 50*time.Millisecond || dl.Sub(start) > time.Second {
		t.Fatalf("deadline %v, %v", dl.Sub(start), ok)
	}
	if ctx.Value(ctxKey{}) != "v" {
		t.Fatal("value of the parent not seen")
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("deadline did not fire")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("after %v: %v", time.Since(start), ctx.Err())
	}
	if ctx.Value(ctxKey{}) != "v" {
		t.Fatal("value of the parent not seen once made")
	}

	// The parent's cancellation reaches it, and a context derived from it.
	p2, cancelP2 := context.WithCancel(context.Background())
	ctx2, cancel2 := n.withRequestTimeout(p2)
	defer cancel2()
	child, cancelChild := context.WithCancel(ctx2)
	defer cancelChild()
	cancelP2()
	for _, c := range []context.Context{ctx2, child} {
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("parent's cancellation did not propagate")
		}
		if !errors.Is(c.Err(), context.Canceled) {
			t.Fatalf("err %v", c.Err())
		}
	}

	// Released before anything waited: canceled, nothing made.
	ctx3, cancel3 := n.withRequestTimeout(context.Background())
	cancel3()
	cancel3()
	if ld := ctx3.(*lazyDeadline); ld.cancel == nil || !errors.Is(ctx3.Err(), context.Canceled) {
		t.Fatalf("released: %v", ctx3.Err())
	}
	select {
	case <-ctx3.Done():
	default:
		t.Fatal("released context not done")
	}
	// Released after it was made: canceled too.
	ctx4, cancel4 := n.withRequestTimeout(context.Background())
	_ = ctx4.Done()
	cancel4()
	if !errors.Is(ctx4.Err(), context.Canceled) {
		t.Fatalf("released after made: %v", ctx4.Err())
	}
}
