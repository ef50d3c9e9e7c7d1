package resp

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvorum/kvorum/internal/acl"
	"github.com/kvorum/kvorum/internal/cmdspec"
	"github.com/kvorum/kvorum/internal/reply"
	"github.com/kvorum/kvorum/internal/resp/codec"
)

// Commands is the table of data commands, which the server validates and
// describes but does not execute (kv.Table in production). Connection
// commands are the server's own.
type Commands interface {
	// Specs lists every client-visible data command (COMMAND, metrics).
	Specs() []*cmdspec.Spec
	// Known reports whether name is a client-visible data command.
	Known(name []byte) bool
	// Check validates a data command before it is run: arity, syntax,
	// size limits. ok=false: answer r and run nothing.
	Check(args [][]byte) (r reply.Reply, ok bool)
	// CheckQueued is Check for a command queued inside MULTI.
	CheckQueued(args [][]byte) (r reply.Reply, ok bool)
	// Blocks reports whether a command may wait (BLPOP, LOCK ACQUIRE):
	// the server then watches the client for a disconnect meanwhile.
	Blocks(args [][]byte) bool
	// Unsupported returns the reply to a Redis command kvorum lacks.
	Unsupported(name []byte) (reply.Reply, bool)
	// Exec encodes a transaction as one data command for Backend.Do:
	// keys[i] was watched at stamps[i]; cmds are the queued data commands.
	Exec(keys [][]byte, stamps []uint64, cmds [][][]byte) [][]byte
}

// Backend executes data commands. The server calls it from connection
// goroutines, concurrently.
type Backend interface {
	// Do executes cmds in order and returns exactly len(cmds) replies
	// (failures as KindError replies). cmds are consecutive data commands
	// of one pipeline, already validated by Commands.Check; they may be applied
	// as one batch. The argument bytes are only valid until Do returns.
	// ctx is cancelled when the connection or the server closes.
	Do(ctx context.Context, cmds [][][]byte) []reply.Reply
	// Watch returns the stamp of each key (kv.WatchStamp) at a linearizable read
	// point, or an error reply.
	Watch(ctx context.Context, keys [][]byte) ([]uint64, *reply.Reply)
	// Info returns the backend's INFO sections (e.g. Replication,
	// Keyspace), appended after the server's own.
	Info() []InfoSection
}

type staleReadsKey struct{}

// StaleReadsOK reports whether the connection that sent a Backend.Do's
// commands asked, with READONLY, that its reads be served from the node's
// local state without a linearizable read point (possibly stale: by as much
// as this node lags behind the leader). Writes are unaffected.
func StaleReadsOK(ctx context.Context) bool {
	v, _ := ctx.Value(staleReadsKey{}).(bool)
	return v
}

// InfoSection is one "# Name" block of INFO output.
type InfoSection struct {
	Name   string
	Fields [][2]string
}

// Config configures a Server. Zero values take defaults.
type Config struct {
	Limits codec.Limits
	// Commands is the data-command table (required): package kv's, with
	// the node's key and value size limits.
	Commands Commands
	// MaxClients bounds concurrent connections (default 10000). A client
	// beyond it gets "ERR max number of clients reached" and is closed.
	MaxClients int
	Logger     *slog.Logger
	// Registerer receives the kvorum_resp_* metrics; nil: not registered.
	Registerer prometheus.Registerer
	NodeID     uint64
	Version    string // kvorum's version, for INFO

	// TLS is what CONFIG GET answers for the tls-* parameters (the TLS
	// port itself is the one ServeTLS listens on).
	TLS TLSParams

	// WriteTimeout bounds one flush of replies to a client (default 30s);
	// a client that does not read is disconnected.
	WriteTimeout time.Duration
	// PipelineMaxCommands and PipelineMaxBytes bound how many already
	// buffered commands are executed as one batch (defaults 1024 and 1 MiB
	// of argument data).
	PipelineMaxCommands int
	PipelineMaxBytes    int

	// Users is the node's ACL users (package acl), kept in step with the
	// applied log by the node; nil: a registry of its own with Redis's
	// default user alone (every client may run everything).
	Users *acl.Registry
	// ACLVersion returns the version of the users the node has applied
	// (the log index of the last change): a change made through this
	// server is answered once it is applied here. nil: at once.
	ACLVersion func() uint64
	// ACLFile is --aclfile, what ACL LOAD reads and ACL SAVE writes ("":
	// none; those commands are refused as Redis refuses them).
	ACLFile string

	// Scripts is the node's record of the scripts running on it
	// (script.Monitor in production); nil: none, and SCRIPT KILL and
	// FUNCTION KILL go to the backend like other commands.
	Scripts Scripts
}

// Scripts is what the server asks of the scripts running on its node.
type Scripts interface {
	// Busy reports whether the oldest running script has run for at least
	// threshold, and whether it is a function.
	Busy(threshold time.Duration) (busy, function bool)
	// Kill is SCRIPT KILL (function false) or FUNCTION KILL: its reply.
	Kill(function bool) reply.Reply
}

// DefaultBusyReplyThreshold is busy-reply-threshold's default, in
// milliseconds (Redis 7.0's).
const DefaultBusyReplyThreshold = 5000

// TLSParams are the TLS settings of the client port, as Redis names them.
type TLSParams struct {
	CertFile, KeyFile, CAFile string
	// AuthClients is tls-auth-clients: yes, no or optional.
	AuthClients string
}

// Defaults for Config.
const (
	DefaultMaxClients          = 10000
	DefaultWriteTimeout        = 30 * time.Second
	DefaultPipelineMaxCommands = 1024
	DefaultPipelineMaxBytes    = 1 << 20
)

// RedisVersion is the Redis version kvorum reports to clients (HELLO,
// INFO). Clients use it to decide which commands and reply shapes exist.
const RedisVersion = "7.2.0"

// keepReplies bounds the reply slice a connection keeps between batches.
const keepReplies = 1024

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("resp: server closed")

// Server serves the Redis protocol: one goroutine per connection, commands
// already pipelined executed as one batch, connection-level commands
// answered here, data commands passed to the Backend.
type Server struct {
	cfg     Config
	table   Commands
	b       Backend
	log     *slog.Logger
	m       *metrics
	cmds    map[string]*command // by lower-case name: connection and data commands
	hub     *hub
	conn    []*command // connection commands, sorted by name
	started time.Time
	runID   string
	port    atomic.Int64
	tlsPort atomic.Int64           // the TLS listener's port (CONFIG GET tls-port)
	bind    atomic.Pointer[string] // the first listener's IP, for CONFIG GET bind
	// maxClients is Config.MaxClients, changed by CONFIG SET maxclients.
	maxClients atomic.Int64
	// idleTimeout closes a client idle for this many seconds (CONFIG SET
	// timeout; 0: never), except a subscriber, as Redis does.
	idleTimeout atomic.Int64
	// maxBulkLen is CONFIG SET proto-max-bulk-len (0: the start-up
	// limit); each connection applies it before its next read.
	maxBulkLen atomic.Int64
	// busyThreshold is busy-reply-threshold (lua-time-limit), in ms: while
	// a script has run longer on this node, commands get BUSY (busy.go).
	busyThreshold atomic.Int64

	nextID     atomic.Uint64
	clients    atomic.Int64
	totalConns atomic.Uint64
	totalCmds  atomic.Uint64
	rejected   atomic.Uint64
	protoErrs  atomic.Uint64
	netIn      atomic.Uint64
	netOut     atomic.Uint64
	netReads   atomic.Uint64  // socket reads (total_reads_processed)
	netWrites  atomic.Uint64  // socket writes of replies (total_writes_processed)
	errs       errorStats     // INFO errorstats (stats.go)
	slow       slowLog        // SLOWLOG (slowlog.go)
	lat        latencyMonitor // LATENCY, INFO latencystats (latency.go)
	aclLog     denialLog      // ACL LOG (auth.go)

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	wg        sync.WaitGroup
}

// NewServer returns a server executing data commands on b.
func NewServer(cfg Config, b Backend) *Server {
	if cfg.Commands == nil {
		panic("resp: Config.Commands is required")
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	if cfg.MaxClients <= 0 {
		cfg.MaxClients = DefaultMaxClients
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.PipelineMaxCommands <= 0 {
		cfg.PipelineMaxCommands = DefaultPipelineMaxCommands
	}
	if cfg.PipelineMaxBytes <= 0 {
		cfg.PipelineMaxBytes = DefaultPipelineMaxBytes
	}
	if cfg.Users == nil {
		cfg.Users = acl.NewRegistry(ACLCommands(cfg.Commands.Specs()))
	}
	var id [20]byte
	_, _ = rand.Read(id[:])
	s := &Server{
		cfg:       cfg,
		table:     cfg.Commands,
		b:         b,
		log:       cfg.Logger,
		m:         newMetrics(cfg.Registerer),
		started:   time.Now(),
		runID:     hex.EncodeToString(id[:]),
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*conn]struct{}),
		hub:       newHub(),
	}
	s.maxClients.Store(int64(cfg.MaxClients))
	s.slow.init()
	s.lat.init()
	s.busyThreshold.Store(DefaultBusyReplyThreshold)
	s.buildTable()
	return s
}

// Serve accepts connections on l until Close. It always returns a non-nil
// error; after Close, ErrServerClosed. The first listener served this way
// is the node's plain-text port (INFO tcp_port, CONFIG GET port); the first
// of any kind gives CONFIG GET bind.
func (s *Server) Serve(l net.Listener) error { return s.serve(l, nil) }

// ServeTLS is Serve for a port that speaks TLS with cfg: each connection's
// handshake runs on its own goroutine, bounded by HandshakeTimeout; a
// client whose handshake fails (a plain-text client, a missing or
// untrusted client certificate) is disconnected. Its port is CONFIG GET
// tls-port.
func (s *Server) ServeTLS(l net.Listener, cfg *tls.Config) error {
	if cfg == nil {
		return errors.New("resp: ServeTLS without a TLS config")
	}
	return s.serve(l, cfg)
}

func (s *Server) serve(l net.Listener, tlsCfg *tls.Config) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = l.Close()
		return ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()
	if a, ok := l.Addr().(*net.TCPAddr); ok {
		if tlsCfg != nil {
			s.tlsPort.CompareAndSwap(0, int64(a.Port))
		} else {
			s.port.CompareAndSwap(0, int64(a.Port))
		}
		ip := a.IP.String()
		s.bind.CompareAndSwap(nil, &ip)
	}
	var delay time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.isClosed() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				// Out of file descriptors and the like: back off, as
				// net/http does, instead of spinning or giving up.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.log.Warn("resp: accept failed; retrying", "err", err, "delay", delay)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		s.accept(nc, tlsCfg)
	}
}

func isTemporary(err error) bool {
	t, ok := err.(interface{ Temporary() bool })
	return ok && t.Temporary()
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *Server) accept(nc net.Conn, tlsCfg *tls.Config) {
	s.totalConns.Add(1)
	s.m.conns.Inc()
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
		_ = tc.SetKeepAlive(true)
	}
	if tlsCfg != nil {
		nc = tls.Server(nc, tlsCfg)
	}
	if s.clients.Add(1) > s.maxClients.Load() {
		s.clients.Add(-1)
		s.rejected.Add(1)
		s.m.rejected.Inc()
		// Like Redis: tell the client why, then close. Best effort, bounded.
		_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = nc.Write([]byte("-ERR max number of clients reached\r\n"))
		_ = nc.Close()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{
		s:       s,
		nc:      nc,
		id:      s.nextID.Add(1),
		ctx:     ctx,
		cancel:  cancel,
		proto:   2,
		created: time.Now(),
	}
	c.rd = codec.NewReader(countingReader{connSource{c}, &s.netIn, &s.netReads}, s.cfg.Limits)
	c.addr = nc.RemoteAddr().String()
	c.laddr = nc.LocalAddr().String()
	c.lastActive.Store(c.created.UnixNano())
	c.initialUser()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.clients.Add(-1)
		cancel()
		_ = nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	s.m.clients.Inc()
	go c.serve()
}

// Close stops accepting, closes every connection and waits for their
// goroutines to finish (a goroutine inside Backend.Do finishes once Do
// returns; its context is cancelled).
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	var err error
	for l := range s.listeners {
		if e := l.Close(); e != nil && !errors.Is(e, net.ErrClosed) && err == nil {
			err = e
		}
	}
	for c := range s.conns {
		c.cancel()
		_ = c.nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

// countingReader counts bytes received for INFO stats.
type countingReader struct {
	r        io.Reader
	n, reads *atomic.Uint64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(uint64(n))
	c.reads.Add(1)
	return n, err
}

// conn is one client connection. Fields below the line are owned by the
// connection goroutine except where noted.
type conn struct {
	s           *Server
	nc          net.Conn
	rd          *codec.Reader
	id          uint64
	ctx         context.Context
	cancel      context.CancelFunc
	created     time.Time
	addr, laddr string
	lastActive  atomic.Int64 // unix nanos of the last command batch
	lastCmd     atomic.Pointer[command]
	// user is the ACL user the connection runs as (auth.go); authed: it
	// has authenticated (or the default user needs no password).
	user   atomic.Pointer[acl.User]
	authed bool
	keys   KeyBuffer // the ACL checks' keys (auth.go)
	// checkedAt is the version of the users this batch's commands were
	// checked with; uc, ucParent and ucCtx the context withUser derives.
	checkedAt    uint64
	uc           *userCheck
	ucParent     context.Context
	ucCtx        context.Context
	protoVersion atomic.Int32 // mirror of proto for CLIENT LIST

	info struct { // read by other connections (CLIENT LIST)
		sync.Mutex
		name, libName, libVer string
	}

	proto      int
	closeAfter bool // QUIT: close once the replies are written
	// readOnly: READONLY was sent; the data commands of this connection go
	// to the backend with StaleReadsOK set (READWRITE clears it).
	readOnly bool
	// clusterAware: a CLUSTER command was sent; commands on keys another
	// node serves answer -MOVED (cluster.go).
	clusterAware bool
	// CLIENT REPLY (clientReply): replyOff silences every reply until
	// CLIENT REPLY ON; skipNext silences the next command's; mute is the
	// decision for each command of the batch in exec, muteThis for the
	// one executing.
	replyOff, skipNext, muteThis bool
	// unblockCh is the waiting run's CLIENT UNBLOCK channel (unblock.go).
	unblockMu sync.Mutex
	unblockCh chan error
	mute      []bool
	out       []byte
	batch     [][][]byte
	replies   []reply.Reply
	run       [][][]byte
	runIdx    []int
	runCmd    []*command

	tx     txState
	peeked []byte   // bytes read while watching a blocked client (see watchDisconnect)
	subs   subState // guarded by s.hub.mu
	push   pusher   // output path once subscribed
}

// HandshakeTimeout bounds a TLS client's handshake.
const HandshakeTimeout = 10 * time.Second

// handshake completes a TLS connection's handshake, bounded by
// HandshakeTimeout and by the server's closing. A failure (a plain-text
// client on the TLS port, a client certificate missing or not signed by
// the CA) is counted and logged at debug level; the caller closes the
// connection.
func (c *conn) handshake(tc *tls.Conn) bool {
	_ = tc.SetDeadline(time.Now().Add(HandshakeTimeout))
	if err := tc.HandshakeContext(c.ctx); err != nil {
		c.s.m.tlsFails.Inc()
		c.s.log.Debug("resp: TLS handshake failed; connection closed", "client", c.addr, "err", err)
		// A client that sent plain text (not a TLS record) is told why,
		// in RESP, before it is disconnected (as net/http answers plain
		// HTTP on an HTTPS port).
		var rhe tls.RecordHeaderError
		if errors.As(err, &rhe) && rhe.Conn != nil {
			_ = rhe.Conn.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = io.WriteString(rhe.Conn, "-ERR this port speaks TLS: connect with TLS (redis-cli --tls)\r\n")
		}
		return false
	}
	_ = tc.SetDeadline(time.Time{})
	return true
}

// noReply is returned by a command handler that wrote its reply itself.
var noReply = reply.Reply{Kind: 255}

const keepOut = 64 << 10

func (c *conn) serve() {
	s := c.s
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("resp: panic while serving a client; connection closed",
				"client", c.addr, "panic", p, "stack", string(debug.Stack()))
		}
		c.cancel()
		_ = c.nc.Close()
		c.dropSubscriptions()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.clients.Add(-1)
		s.m.clients.Dec()
		s.wg.Done()
	}()
	if tc, ok := c.nc.(*tls.Conn); ok && !c.handshake(tc) {
		return
	}
	maxCmds, maxBytes := s.cfg.PipelineMaxCommands, s.cfg.PipelineMaxBytes
	idleDeadline := false
	bulkLen := int64(0)
	for {
		if n := s.maxBulkLen.Load(); n != bulkLen {
			bulkLen = n
			c.rd.SetMaxBulkLen(int(min(n, math.MaxInt)))
		}
		if t := s.idleTimeout.Load(); t > 0 && !c.subscribed() {
			_ = c.nc.SetReadDeadline(time.Now().Add(time.Duration(t) * time.Second))
			idleDeadline = true
		} else if idleDeadline {
			_ = c.nc.SetReadDeadline(time.Time{})
			idleDeadline = false
		}
		args, err := c.rd.ReadCommand()
		if err != nil {
			c.readFailed(err)
			return
		}
		c.batch = append(c.batch[:0], args)
		var perr error
		for len(c.batch) < maxCmds && c.rd.Pending() < maxBytes && c.rd.Buffered() > 0 {
			args, ok, err := c.rd.TryReadCommand()
			if err != nil {
				perr = err
				break
			}
			if !ok {
				break
			}
			c.batch = append(c.batch, args)
		}
		c.lastActive.Store(time.Now().UnixNano())
		c.exec(c.batch)
		if perr != nil && !c.closeAfter {
			c.protocolError(perr)
			c.closeAfter = true
		}
		clear(c.batch)
		c.rd.Release()
		if !c.flush() || c.closeAfter {
			return
		}
	}
}

// readFailed handles an error from ReadCommand: a protocol error is
// answered before closing, like Redis does.
func (c *conn) readFailed(err error) {
	var pe *codec.ProtocolError
	if errors.As(err, &pe) {
		c.protocolError(err)
		c.flush()
		return
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		c.s.log.Debug("resp: client idle longer than the timeout; connection closed", "client", c.addr)
		return
	}
	if err != io.EOF && !errors.Is(err, net.ErrClosed) && !c.s.isClosed() {
		c.s.log.Debug("resp: client read failed", "client", c.addr, "err", err)
	}
}

func (c *conn) protocolError(err error) {
	c.s.protoErrs.Add(1)
	c.s.m.protoErrs.Inc()
	c.s.log.Debug("resp: protocol error; closing connection", "client", c.addr, "err", err)
	c.out = codec.AppendSimple(c.out, '-', []byte(err.Error()))
}

// flush writes the pending replies; false if the connection failed.
func (c *conn) flush() bool {
	if len(c.out) == 0 {
		return true
	}
	if c.push.started {
		ok := c.enqueue(c.out)
		c.out = c.out[:0]
		return ok
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
	n, err := c.nc.Write(c.out)
	c.s.netOut.Add(uint64(n))
	c.s.netWrites.Add(1)
	if cap(c.out) > keepOut {
		c.out = nil
	} else {
		c.out = c.out[:0]
	}
	if err != nil {
		if !errors.Is(err, net.ErrClosed) && !c.s.isClosed() {
			c.s.log.Debug("resp: client write failed; closing connection", "client", c.addr, "err", err)
		}
		return false
	}
	return true
}

// exec runs one batch of commands and appends their replies to c.out in
// order. Runs of data commands go to the backend in one Do call; a
// connection command flushes the run before it executes.
func (c *conn) exec(batch [][][]byte) {
	s := c.s
	s.totalCmds.Add(uint64(len(batch)))
	s.m.batch.Observe(float64(len(batch)))
	if cap(c.replies) < len(batch) {
		c.replies = make([]reply.Reply, len(batch))
	}
	replies := c.replies[:len(batch)]
	c.mute = slices.Grow(c.mute[:0], len(batch))[:len(batch)]
	if u := c.user.Load(); u != nil && !u.AllowsAll() {
		c.checkedAt = s.aclVersion() // before the checks (auth.go)
	}
	c.run, c.runIdx, c.runCmd = c.run[:0], c.runIdx[:0], c.runCmd[:0]
	from := 0 // first command whose reply is not yet in c.out
	for i, args := range batch {
		c.muteThis = c.replyOff || c.skipNext // CLIENT REPLY OFF or SKIP
		c.skipNext = false
		c.mute[i] = c.muteThis
		cmd := s.lookup(args[0])
		if cmd != nil {
			c.lastCmd.Store(cmd)
			cmd.calls.Inc()
			ctx := acl.ContextToplevel
			if c.tx.multi && !txControl(cmd) {
				ctx = acl.ContextMulti
			}
			if r, refused := c.aclRefusal(cmd, args, ctx, false); refused {
				if ctx == acl.ContextMulti {
					c.tx.dirty = true // EXEC aborts, as in Redis
				}
				replies[i] = r
				cmd.stats.record(&replies[i], 0)
				continue
			}
			if r, busy := c.busyReply(cmd, args); busy {
				replies[i] = r
				continue
			}
		}
		intercept := c.tx.multi && !txControl(cmd) ||
			c.push.started && c.inSubscribedRESP2() && (cmd == nil || !allowedSubscribed(cmd.spec.Name))
		if intercept || cmd != nil && cmd.handler != nil {
			c.doRun(replies)
			for ; from < i; from++ {
				c.emit(&replies[from], c.mute[from])
			}
			from = i + 1
			start := time.Now()
			var r reply.Reply
			queued := false
			switch {
			case c.tx.multi && !txControl(cmd):
				r, queued = c.queue(cmd, args), true
			case intercept:
				r = reply.Error("ERR Can't execute '" + strings.ToLower(string(args[0])) +
					"': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context")
			default:
				r = c.connCommand(cmd, args)
			}
			if r.Kind != noReply.Kind {
				c.emit(&r, c.muteThis) // CLIENT REPLY may have changed it
			}
			if cmd != nil {
				d := time.Since(start)
				cmd.latency.Observe(d.Seconds())
				if !queued || rejectedReply(&r) {
					if call := callOf(cmd, args); call != nil && call.stats.record(&r, d) {
						c.observe(call, args, d)
					}
				}
			}
			if c.closeAfter {
				clear(replies)
				return // QUIT: later commands are not executed
			}
			continue
		}
		if !s.table.Known(args[0]) {
			replies[i] = s.unknownCommand(args)
			continue
		}
		if cmd != nil && arityOK(cmd.spec.Arity, len(args)) && s.oomRefuses(cmd, args) {
			replies[i] = errOOM // maxmemory.go
			cmd.stats.record(&replies[i], 0)
			continue
		}
		if r, ok := s.table.Check(args); !ok {
			replies[i] = r
			if cmd != nil && cmd.stats.record(&replies[i], 0) {
				c.observe(cmd, args, 0) // refused by its own checks, as Redis's command would be
			}
			continue
		}
		if r, ok := c.scriptKill(args); ok {
			replies[i] = r
			continue
		}
		if c.clusterAware {
			if r, ok := c.moved(cmd, args); ok {
				replies[i] = r
				continue
			}
		}
		c.run = append(c.run, c.aclWrap(s.oomWrap(cmd, args)))
		c.runIdx = append(c.runIdx, i)
		c.runCmd = append(c.runCmd, cmd)
	}
	c.doRun(replies)
	for ; from < len(batch); from++ {
		c.emit(&replies[from], c.mute[from])
	}
	clear(replies)
	if cap(c.replies) > keepReplies {
		c.replies = nil
	}
}

// emit appends reply r to the connection's output (unless muted by
// CLIENT REPLY), counting it in INFO errorstats if it is an error.
func (c *conn) emit(r *reply.Reply, muted bool) {
	c.s.errs.note(r)
	if !muted {
		c.out = AppendReply(c.out, *r, c.proto)
	}
}

// doRun sends the pending run of data commands to the backend.
func (c *conn) doRun(replies []reply.Reply) {
	if len(c.run) == 0 {
		return
	}
	start := time.Now()
	ctx := c.ctx
	blocks := slices.ContainsFunc(c.run, c.s.table.Blocks)
	if blocks && c.rd.Buffered() == 0 {
		var stop func()
		ctx, stop = c.watchDisconnect()
		defer stop()
	}
	if c.readOnly {
		ctx = context.WithValue(ctx, staleReadsKey{}, true)
	}
	ctx = c.withUser(ctx)
	if blocks {
		var done func()
		ctx, done = c.blockingContext(ctx)
		defer done()
	}
	out := c.s.b.Do(ctx, c.run)
	el := time.Since(start)
	if !blocks {
		c.s.lat.note("kvorum-batch", el)
	}
	d := el.Seconds()
	share := el / time.Duration(len(c.run)) // INFO commandstats: the run's time split among its commands
	for j, i := range c.runIdx {
		if j < len(out) {
			replies[i] = out[j]
		} else {
			replies[i] = reply.Error("ERR internal error: backend returned " + strconv.Itoa(len(out)) +
				" replies for " + strconv.Itoa(len(c.run)) + " commands")
		}
		if cmd := c.runCmd[j]; cmd != nil {
			cmd.latency.Observe(d)
			// A blocking command's time includes its wait, which Redis's
			// SLOWLOG and LATENCY leave out: kvorum does not observe it.
			if cmd.stats.record(&replies[i], share) && !(blocks && c.s.table.Blocks(c.run[j])) {
				c.observe(cmd, c.run[j], share)
			}
		}
	}
	clear(c.run)
	clear(c.runCmd)
	c.run, c.runIdx, c.runCmd = c.run[:0], c.runIdx[:0], c.runCmd[:0]
}

// unknownCommand is Redis 7's reply to a command it does not know.
func (s *Server) unknownCommand(args [][]byte) reply.Reply {
	if r, ok := s.table.Unsupported(args[0]); ok {
		return r
	}
	return reply.UnknownCommand(args)
}

// lower writes the ASCII lower case of name into buf, for map lookups that
// do not allocate; ok is false if name is too long to be a command.
func lower(buf *[32]byte, name []byte) ([]byte, bool) {
	if len(name) > len(buf) {
		return nil, false
	}
	for i, c := range name {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return buf[:len(name)], true
}

// lookup finds a command by name, case-insensitively, without allocating.
func (s *Server) lookup(name []byte) *command {
	var buf [32]byte
	l, ok := lower(&buf, name)
	if !ok {
		return nil
	}
	return s.cmds[string(l)]
}

// connSource is what the connection's Reader reads: bytes a disconnect
// watcher already took off the socket, then the socket.
type connSource struct{ c *conn }

func (s connSource) Read(p []byte) (int, error) {
	if c := s.c; len(c.peeked) > 0 {
		n := copy(p, c.peeked)
		c.peeked = c.peeked[n:]
		return n, nil
	}
	return s.c.nc.Read(p)
}

// watchDisconnect reads from the socket while a blocking command waits, so
// that a client that goes away cancels the returned context (and the wait)
// instead of later popping an element nobody receives. Bytes the client
// sends meanwhile are kept for the Reader. stop ends the watch.
func (c *conn) watchDisconnect() (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(c.ctx)
	done := make(chan struct{})
	_ = c.nc.SetReadDeadline(time.Time{}) // a blocked client is not idle (CONFIG timeout)
	go func() {
		defer close(done)
		var b [4096]byte
		n, err := c.nc.Read(b[:])
		if n > 0 {
			c.peeked = append(c.peeked, b[:n]...)
			return // the client is alive and pipelining
		}
		var ne net.Error
		if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
			cancel()
		}
	}()
	return ctx, func() {
		_ = c.nc.SetReadDeadline(time.Now()) // interrupt the read
		<-done
		_ = c.nc.SetReadDeadline(time.Time{})
		cancel()
	}
}
