// Command floor is a measuring stick, not a database: the least work a
// write acknowledged only once it is fsynced on a majority of three
// processes can cost on this machine, with none of kvorum's machinery
// (no Raft, no Pebble, no forwarding, no read barrier).
//
// One leader and two followers, each its own process:
//
//   - the leader speaks just enough RESP for `kvorum bench kv` (SET, GET,
//     PING; clients must all connect to the leader). Writes are group
//     committed as Redis's appendfsync always does: a committer goroutine
//     takes every SET queued, appends the batch to its log file, sends it
//     to both followers in one frame each, fdatasyncs, waits for one
//     follower's acknowledgement (with its own fsync, a majority), applies
//     the batch to an in-memory map and answers. Writes that arrive
//     meanwhile form the next batch. GET reads the map.
//   - a follower appends each batch frame it receives to its log file,
//     fdatasyncs it and acknowledges it.
//
// With -pebble every process keeps its log and data in Pebble, opened as
// kvorum opens it (storage.Open, the same options): each batch is one
// synced Pebble batch holding the frame under a log key and each record
// under its own key, the log truncated as kvorum truncates its Raft log
// (past 10,000 entries, down to 5,000), and GET reads Pebble. The
// difference between the two floors is what the storage engine kvorum is
// built on costs; the rest of kvorum's distance to the -pebble floor is
// Raft and kvorum's own plumbing.
//
// Usage (three processes; see docs/benchmarks.md):
//
//	go run ./scripts/floor -follower 127.0.0.1:27380 -dir /tmp/f/1 &
//	go run ./scripts/floor -follower 127.0.0.1:27381 -dir /tmp/f/2 &
//	go run ./scripts/floor -leader 127.0.0.1:26379 -peers 127.0.0.1:27380,127.0.0.1:27381 -dir /tmp/f/0 &
//	kvorum bench kv --target floor=redis://127.0.0.1:26379 ...
package main

import (
	"bufio"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"golang.org/x/sys/unix"

	"github.com/kvorum/kvorum/internal/resp/codec"
	"github.com/kvorum/kvorum/internal/storage"
)

func main() {
	leader := flag.String("leader", "", "serve clients (RESP) on `ADDR` as the leader")
	peers := flag.String("peers", "", "the followers' `ADDR,ADDR` (leader only)")
	follower := flag.String("follower", "", "serve the leader on `ADDR` as a follower")
	dir := flag.String("dir", "", "`DIR` for the log file (created)")
	usePebble := flag.Bool("pebble", false, "keep the log and the data in Pebble, as kvorum does (see above)")
	flag.Parse()
	if *dir == "" || (*leader == "") == (*follower == "") {
		fmt.Fprintln(os.Stderr, "floor: give -dir and one of -leader (with -peers) or -follower")
		os.Exit(2)
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		log.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(*dir, "log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		log.Fatal(err)
	}
	var st store = &fileStore{f: f}
	if *usePebble {
		db, err := storage.Open(filepath.Join(*dir, "pebble"), storage.Options{})
		if err != nil {
			log.Fatal(err)
		}
		st = &pebbleStore{db: db}
	}
	if *follower != "" {
		serveFollower(*follower, st)
		return
	}
	runLeader(*leader, strings.Split(*peers, ","), st)
}

// store persists a batch frame durably (with -pebble the leader also
// reads its records back: leaderState.pebble).
type store interface {
	persist(frame []byte)
}

type fileStore struct{ f *os.File }

func (s *fileStore) persist(frame []byte) {
	if _, err := s.f.Write(frame); err != nil {
		log.Fatal(err)
	}
	fsync(s.f)
}

type pebbleStore struct {
	db       *pebble.DB
	seq, low uint64
}

// logKey is kvorum's Raft log key of range 1 (storage.LogKey).
func logKey(seq uint64) []byte { return storage.LogKey(1, seq) }

func dataKey(k []byte) []byte { return append([]byte{0x10}, k...) }

func (s *pebbleStore) persist(frame []byte) {
	b := s.db.NewBatch()
	defer b.Close()
	s.seq++
	_ = b.Set(logKey(s.seq), frame, nil)
	forEachRecord(frame, func(k, v []byte) { _ = b.Set(dataKey(k), v, nil) })
	if s.seq-s.low > 10000 {
		_ = b.DeleteRange(logKey(s.low), logKey(s.seq-5000), nil)
		s.low = s.seq - 5000
	}
	if err := b.Commit(pebble.Sync); err != nil {
		log.Fatal(err)
	}
}

func (s *pebbleStore) get(k []byte) ([]byte, bool) {
	v, c, err := s.db.Get(dataKey(k))
	if err != nil {
		return nil, false
	}
	defer c.Close()
	return append([]byte(nil), v...), true
}

// forEachRecord calls fn for each key and value of a batch frame.
func forEachRecord(frame []byte, fn func(k, v []byte)) {
	for len(frame) > 0 {
		n, w := binary.Uvarint(frame)
		k := frame[w : w+int(n)]
		frame = frame[w+int(n):]
		n, w = binary.Uvarint(frame)
		v := frame[w : w+int(n)]
		frame = frame[w+int(n):]
		fn(k, v)
	}
}

func fsync(f *os.File) {
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		log.Fatal(err)
	}
}

// serveFollower: frames are a 4-byte length and a batch; the answer to
// each is one byte, after the batch is appended and synced.
func serveFollower(addr string, f store) {
	listen(addr, func(c net.Conn) {
		defer c.Close()
		r := bufio.NewReaderSize(c, 1<<20)
		var hdr [4]byte
		var buf []byte
		for {
			if _, err := io.ReadFull(r, hdr[:]); err != nil {
				return
			}
			n := binary.BigEndian.Uint32(hdr[:])
			if cap(buf) < int(n) {
				buf = make([]byte, n)
			}
			buf = buf[:n]
			if _, err := io.ReadFull(r, buf); err != nil {
				return
			}
			f.persist(buf)
			if _, err := c.Write([]byte{1}); err != nil {
				return
			}
		}
	})
}

// listen serves each connection accepted on addr with serve, on a
// goroutine of its own.
func listen(addr string, serve func(net.Conn)) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	for {
		c, err := l.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go serve(c)
	}
}

type write struct {
	key, val []byte
	done     chan struct{}
}

type leaderState struct {
	mu    sync.Mutex
	queue []*write
	wake  chan struct{}
	data  sync.Map // string → []byte
	// pebble, with -pebble: GET reads it (the map stays empty).
	pebble *pebbleStore
}

func runLeader(addr string, peers []string, f store) {
	st := &leaderState{wake: make(chan struct{}, 1)}
	if ps, ok := f.(*pebbleStore); ok {
		st.pebble = ps
	}
	var conns []net.Conn
	for _, p := range peers {
		c, err := net.Dial("tcp", p)
		if err != nil {
			log.Fatal(err)
		}
		conns = append(conns, c)
	}
	go st.commit(f, conns)
	listen(addr, st.serve)
}

// commit is the group committer: one batch in flight at a time.
func (st *leaderState) commit(f store, peers []net.Conn) {
	acks := make(chan error, len(peers))
	var frame []byte
	for range st.wake {
		st.mu.Lock()
		batch := st.queue
		st.queue = nil
		st.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		frame = append(frame[:0], 0, 0, 0, 0)
		for _, w := range batch {
			frame = binary.AppendUvarint(frame, uint64(len(w.key)))
			frame = append(frame, w.key...)
			frame = binary.AppendUvarint(frame, uint64(len(w.val)))
			frame = append(frame, w.val...)
		}
		binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
		for _, c := range peers {
			go func() {
				if _, err := c.Write(frame); err != nil {
					acks <- err
					return
				}
				var b [1]byte
				_, err := io.ReadFull(c, b[:])
				acks <- err
			}()
		}
		f.persist(frame[4:])
		if err := <-acks; err != nil { // one follower: with this node, a majority
			log.Fatal(err)
		}
		for _, w := range batch {
			if st.pebble == nil {
				st.data.Store(string(w.key), w.val)
			}
			close(w.done)
		}
		if err := <-acks; err != nil { // the other, before the next frame
			log.Fatal(err)
		}
	}
}

func (st *leaderState) serve(c net.Conn) {
	defer c.Close()
	r := codec.NewReader(c, codec.Limits{})
	w := bufio.NewWriter(c)
	for {
		args, err := r.ReadCommand()
		if err != nil {
			return
		}
		switch cmd := strings.ToUpper(string(args[0])); {
		case cmd == "SET" && len(args) >= 3:
			wr := &write{key: append([]byte(nil), args[1]...), val: append([]byte(nil), args[2]...), done: make(chan struct{})}
			st.mu.Lock()
			st.queue = append(st.queue, wr)
			st.mu.Unlock()
			select {
			case st.wake <- struct{}{}:
			default:
			}
			<-wr.done
			w.WriteString("+OK\r\n")
		case cmd == "GET" && len(args) == 2:
			var b []byte
			ok := false
			if st.pebble != nil {
				b, ok = st.pebble.get(args[1])
			} else if v, found := st.data.Load(string(args[1])); found {
				b, ok = v.([]byte), true
			}
			if ok {
				fmt.Fprintf(w, "$%d\r\n", len(b))
				w.Write(b)
				w.WriteString("\r\n")
			} else {
				w.WriteString("$-1\r\n")
			}
		case cmd == "PING":
			w.WriteString("+PONG\r\n")
		default:
			w.WriteString("-ERR floor: only SET, GET, PING\r\n")
		}
		r.Release()
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return
			}
		}
	}
}
