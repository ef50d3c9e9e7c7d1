package kvlock_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/kvorum/kvorum/pkg/kvlock"
	"github.com/redis/go-redis/v9"
)

// Take a lock, write under it with the fencing token, and stop when the
// lease is lost. (Needs a kvorum cluster at 127.0.0.1:6379.)
func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()

	s, err := kvlock.NewSession(ctx, rdb, kvlock.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(context.Background()) // revokes the lease: releases its locks at once

	m := s.Mutex("orders")
	lockCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	tok, err := m.Lock(lockCtx)
	if errors.Is(err, context.DeadlineExceeded) {
		log.Print("orders is busy; try later")
		return
	} else if err != nil {
		log.Fatal(err)
	}
	log.Printf("holding orders with fencing token %d", tok)

	// The write happens only if tok still holds the lock.
	if err := m.Fenced(ctx, "INCR", "orders:next-id").Err(); errors.Is(err, kvlock.ErrFenced) {
		log.Print("lost the lock before writing; nothing was written")
		return
	}

	select {
	case <-s.Done():
		log.Printf("lease lost: %v; stop using the resource", s.Err())
		return
	default:
	}
	if err := m.Unlock(ctx); err != nil {
		log.Print(err)
	}
}

// A read-write lock: readers share it, a writer excludes them.
func ExampleSession_RWMutex() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	s, err := kvlock.NewSession(ctx, rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx)

	rw := s.RWMutex("catalog")
	if _, err := rw.RLock(ctx); err != nil {
		log.Fatal(err)
	}
	// ... read the catalog ...
	rw.RUnlock(ctx)
}
