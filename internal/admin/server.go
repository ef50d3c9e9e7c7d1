package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Default timeouts.
const (
	DefaultAddMemberTimeout = 60 * time.Second
	DefaultRequestTimeout   = 30 * time.Second
	// maxBodySize caps request bodies; ours are tiny.
	maxBodySize = 64 << 10
)

// Config configures an admin server.
type Config struct {
	// Node is the node served. Required.
	Node NodeAPI
	// Registry holds the node's metrics; Go and process collectors are
	// added to it (unless already registered). Default: a new registry.
	Registry *prometheus.Registry
	// Logger receives request logs (debug) and errors. Default: discard.
	Logger *slog.Logger

	// AddMemberTimeout caps POST /v1/members (catching up a new member can
	// take a while). Default 60s.
	AddMemberTimeout time.Duration
	// RequestTimeout caps the other mutating requests. Default 30s.
	RequestTimeout time.Duration

	// Token, when set, must be sent as "Authorization: Bearer <token>"
	// on every path but /healthz and /readyz (compared in constant time);
	// others get 401. CertAuth also admits a request whose TLS connection
	// presented a client certificate that verified against the server's
	// CA (the listener's tls.Config verifies it); with CertAuth and no
	// Token, such a certificate is required. Neither: no authentication.
	Token    string
	CertAuth bool
	// Pprof serves Go's profiler under /debug/pprof/ (404 otherwise).
	Pprof bool
}

// Server is an admin HTTP server. Create it with New, run it with Serve,
// stop it with Close.
type Server struct {
	cfg      Config
	node     NodeAPI
	log      *slog.Logger
	srv      *http.Server
	handler  http.Handler
	requests *prometheus.CounterVec

	baseCtx    context.Context
	cancelBase context.CancelFunc
	closeOnce  sync.Once
	closeErr   error
}

// New returns an admin server for cfg.Node. It panics if cfg.Node is nil.
func New(cfg Config) *Server {
	if cfg.Node == nil {
		panic("admin: Config.Node is nil")
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.AddMemberTimeout <= 0 {
		cfg.AddMemberTimeout = DefaultAddMemberTimeout
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	s := &Server{cfg: cfg, node: cfg.Node, log: cfg.Logger}
	s.baseCtx, s.cancelBase = context.WithCancel(context.Background())

	registerOrIgnore(cfg.Registry, collectors.NewGoCollector())
	registerOrIgnore(cfg.Registry, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvorum_admin_http_requests_total",
		Help: "Admin HTTP requests by handler and status code.",
	}, []string{"handler", "code"})
	if c, ok := registerOrIgnore(cfg.Registry, s.requests).(*prometheus.CounterVec); ok {
		s.requests = c
	}

	mux := http.NewServeMux()
	s.route(mux, "/healthz", "healthz", map[string]http.HandlerFunc{http.MethodGet: s.healthz})
	s.route(mux, "/readyz", "readyz", map[string]http.HandlerFunc{http.MethodGet: s.readyz})
	metrics := promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{
		Registry:          cfg.Registry,
		ErrorLog:          slogPromLogger{s.log},
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
	})
	s.route(mux, "/metrics", "metrics", map[string]http.HandlerFunc{http.MethodGet: metrics.ServeHTTP})
	s.route(mux, "/v1/status", "status", map[string]http.HandlerFunc{http.MethodGet: s.status})
	s.route(mux, "/v1/members", "members", map[string]http.HandlerFunc{
		http.MethodGet:  s.listMembers,
		http.MethodPost: s.addMember,
	})
	s.route(mux, "/v1/members/{id}", "member", map[string]http.HandlerFunc{http.MethodDelete: s.removeMember})
	s.route(mux, "/v1/transfer-leader", "transfer-leader", map[string]http.HandlerFunc{http.MethodPost: s.transferLeader})
	s.route(mux, "/v1/ranges", "ranges", map[string]http.HandlerFunc{http.MethodGet: s.ranges})
	s.route(mux, "/v1/ranges/{id}/split", "range-split", map[string]http.HandlerFunc{http.MethodPost: s.splitRange})
	s.route(mux, "/v1/ranges/{id}/transfer-leader", "range-transfer-leader", map[string]http.HandlerFunc{http.MethodPost: s.transferRangeLeader})
	s.route(mux, "/v1/backup", "backup", map[string]http.HandlerFunc{http.MethodGet: s.backup})
	s.route(mux, "/", "other", map[string]http.HandlerFunc{})
	if cfg.Pprof {
		// Go profiling: only with --pprof (a profile costs CPU and shows
		// the command line).
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	s.handler = mux
	if cfg.Token != "" || cfg.CertAuth {
		s.handler = s.authenticate(mux)
	}

	s.srv = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		// Long enough for the slowest request (member add) to answer.
		WriteTimeout: cfg.AddMemberTimeout + 30*time.Second,
		IdleTimeout:  2 * time.Minute,
		ErrorLog:     slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:  func(net.Listener) context.Context { return s.baseCtx },
	}
	return s
}

// Handler returns the server's HTTP handler (for tests and embedding).
func (s *Server) Handler() http.Handler { return s.handler }

// Serve accepts connections on l until Close. It returns nil after Close.
func (s *Server) Serve(l net.Listener) error {
	err := s.srv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops the server: in-flight requests are cancelled (their node
// operations see a cancelled context) and given a few seconds to answer.
// Safe to call more than once, and before Serve.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.cancelBase()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.srv.Shutdown(ctx); err != nil {
			s.closeErr = s.srv.Close()
		}
	})
	return s.closeErr
}

// route registers path with one handler per method. HEAD is served by the
// GET handler. Other methods get a JSON 405 with an Allow header.
func (s *Server) route(mux *http.ServeMux, path, name string, byMethod map[string]http.HandlerFunc) {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodDelete} {
		if _, ok := byMethod[m]; ok {
			allowed = append(allowed, m)
		}
		if m == http.MethodHead && byMethod[http.MethodGet] != nil {
			allowed = append(allowed, m)
		}
	}
	allow := strings.Join(allowed, ", ")
	mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		rw := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		start := time.Now()
		defer func() {
			s.requests.WithLabelValues(name, strconv.Itoa(rw.code)).Inc()
			s.log.Debug("admin request", "method", r.Method, "path", r.URL.Path,
				"code", rw.code, "duration", time.Since(start), "remote", r.RemoteAddr)
		}()
		if path == "/" {
			writeError(rw, http.StatusNotFound, fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path), 0)
			return
		}
		method := r.Method
		if method == http.MethodHead {
			method = http.MethodGet
		}
		h, ok := byMethod[method]
		if !ok {
			rw.Header().Set("Allow", allow)
			writeError(rw, http.StatusMethodNotAllowed,
				fmt.Sprintf("method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, allow), 0)
			return
		}
		h(rw, r)
	})
}

// authenticate wraps h: every path but the probes needs the bearer token
// or a verified client certificate.
func (s *Server) authenticate(h http.Handler) http.Handler {
	// Hashes of equal length: the comparison leaks neither the token's
	// bytes nor its length.
	want := sha256.Sum256([]byte("Bearer " + s.cfg.Token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/healthz" || r.URL.Path == "/readyz":
		case s.cfg.Token != "" && tokenOK(r.Header.Get("Authorization"), want):
		case s.cfg.CertAuth && r.TLS != nil && len(r.TLS.VerifiedChains) > 0:
		default:
			s.requests.WithLabelValues("unauthorized", "401").Inc()
			s.log.Debug("admin request refused: not authenticated", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
			var msg string
			switch {
			case s.cfg.Token != "" && s.cfg.CertAuth:
				msg = "authentication required: send 'Authorization: Bearer <token>' (kvorum ctl --token-file) or a client certificate signed by the admin CA"
			case s.cfg.Token != "":
				msg = "authentication required: send 'Authorization: Bearer <token>' (kvorum ctl --token-file or KVORUM_ADMIN_TOKEN)"
			default:
				msg = "authentication required: present a client certificate signed by the admin CA"
			}
			if s.cfg.Token != "" {
				w.Header().Set("WWW-Authenticate", `Bearer realm="kvorum"`)
			}
			writeError(w, http.StatusUnauthorized, msg, 0)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func tokenOK(header string, want [32]byte) bool {
	got := sha256.Sum256([]byte(header))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, "ok\n")
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	st := s.node.Status()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if st.Ready {
		io.WriteString(w, "ok\n")
		return
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	io.WriteString(w, "not ready: "+notReadyReason(st)+"\n")
}

// notReadyReason explains why a node is not ready, as well as its status
// allows.
func notReadyReason(st Status) string {
	switch {
	case st.Leader == 0:
		return "no leader known (election in progress or quorum lost)"
	case st.AppliedIndex < st.CommitIndex:
		return fmt.Sprintf("catching up: applied index %d < commit index %d", st.AppliedIndex, st.CommitIndex)
	default:
		return fmt.Sprintf("waiting to confirm leader %d's commit index", st.Leader)
	}
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	st := s.node.Status()
	if st.Members == nil {
		st.Members = []Member{}
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) members() MembersResponse {
	st := s.node.Status()
	m := st.Members
	if m == nil {
		m = []Member{}
	}
	return MembersResponse{NodeID: st.NodeID, Leader: st.Leader, Members: m}
}

func (s *Server) ranges(w http.ResponseWriter, r *http.Request) {
	rs := s.node.Ranges()
	if rs.Ranges == nil {
		rs.Ranges = []Range{}
	}
	writeJSON(w, http.StatusOK, rs)
}

func (s *Server) listMembers(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.members())
}

func (s *Server) addMember(w http.ResponseWriter, r *http.Request) {
	var req AddMemberRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.ID == 0 {
		writeError(w, http.StatusBadRequest, `"id" must be a positive integer`, 0)
		return
	}
	if err := ValidatePeerAddr(req.PeerAddr); err != nil {
		writeError(w, http.StatusBadRequest, `"peer_addr": `+err.Error(), 0)
		return
	}
	for _, m := range s.node.Status().Members {
		if m.ID == req.ID && !m.Learner {
			writeError(w, http.StatusConflict, fmt.Sprintf("node %d is already a voting member (peer address %s)", m.ID, m.PeerAddr), 0)
			return
		}
		if m.ID != req.ID && m.PeerAddr == req.PeerAddr {
			writeError(w, http.StatusConflict, fmt.Sprintf("peer address %s is already used by node %d", m.PeerAddr, m.ID), 0)
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.AddMemberTimeout)
	defer cancel()
	s.log.Info("admin: adding member", "id", req.ID, "peer_addr", req.PeerAddr)
	if err := s.node.AddMember(ctx, req.ID, req.PeerAddr); err != nil {
		s.nodeError(w, fmt.Sprintf("add member %d", req.ID), s.cfg.AddMemberTimeout, err)
		return
	}
	writeJSON(w, http.StatusOK, s.members())
}

func (s *Server) removeMember(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid member id %q: must be a positive integer", r.PathValue("id")), 0)
		return
	}
	if !hasMember(s.node.Status().Members, id) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("node %d is not a member", id), 0)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	s.log.Info("admin: removing member", "id", id)
	if err := s.node.RemoveMember(ctx, id); err != nil {
		s.nodeError(w, fmt.Sprintf("remove member %d", id), s.cfg.RequestTimeout, err)
		return
	}
	writeJSON(w, http.StatusOK, s.members())
}

func (s *Server) transferLeader(w http.ResponseWriter, r *http.Request) {
	var req TransferLeaderRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.ID == 0 {
		writeError(w, http.StatusBadRequest, `"id" must be a positive integer`, 0)
		return
	}
	st := s.node.Status()
	var target *Member
	for i := range st.Members {
		if st.Members[i].ID == req.ID {
			target = &st.Members[i]
		}
	}
	if target == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("node %d is not a member", req.ID), 0)
		return
	}
	if target.Learner {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("node %d is a learner and cannot lead", req.ID), 0)
		return
	}
	if st.Leader == req.ID {
		writeJSON(w, http.StatusOK, TransferLeaderResponse{Leader: req.ID})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	s.log.Info("admin: transferring leadership", "to", req.ID, "from", st.Leader)
	if err := s.node.TransferLeader(ctx, req.ID); err != nil {
		s.nodeError(w, fmt.Sprintf("transfer leadership to node %d", req.ID), s.cfg.RequestTimeout, err)
		return
	}
	writeJSON(w, http.StatusOK, TransferLeaderResponse{Leader: req.ID})
}

func hasMember(ms []Member, id uint64) bool {
	for _, m := range ms {
		if m.ID == id {
			return true
		}
	}
	return false
}

// nodeError answers a failed node operation with the matching status code.
func (s *Server) nodeError(w http.ResponseWriter, op string, timeout time.Duration, err error) {
	code := StatusCode(err)
	msg := op + ": " + err.Error()
	if code == http.StatusGatewayTimeout {
		msg = fmt.Sprintf("%s: timed out after %s (%v)", op, timeout, err)
	}
	var leader uint64
	if code == http.StatusMisdirectedRequest {
		leader = s.node.Status().Leader
	}
	if code >= 500 {
		s.log.Warn("admin: operation failed", "op", op, "code", code, "err", err)
	}
	writeError(w, code, msg, leader)
}

// StatusCode maps a NodeAPI error to an HTTP status code.
func StatusCode(err error) int {
	var hs HTTPStatuser
	switch {
	case errors.As(err, &hs):
		return hs.HTTPStatus()
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	case errors.Is(err, context.Canceled), errors.Is(err, ErrNoLeader), errors.Is(err, ErrStopped):
		return http.StatusServiceUnavailable
	case errors.Is(err, ErrNotLeader):
		return http.StatusMisdirectedRequest
	case errors.Is(err, ErrUnknownMember):
		return http.StatusNotFound
	case errors.Is(err, ErrMemberExists), errors.Is(err, ErrBusy):
		return http.StatusConflict
	case errors.Is(err, ErrInvalid):
		return http.StatusBadRequest
	}
	// An error that crossed from another node (a change forwarded to the
	// leader) was rebuilt there with its identity (package server,
	// peererr.go), so the cases above see it too.
	return http.StatusInternalServerError
}

// ValidatePeerAddr checks that addr is a dialable host:port.
func ValidatePeerAddr(addr string) error {
	if addr == "" {
		return errors.New("address is empty (want host:port)")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %v", addr, strings.TrimPrefix(err.Error(), "address "+addr+": "))
	}
	if host == "" {
		return fmt.Errorf("%q has no host (other nodes must be able to dial it)", addr)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return fmt.Errorf("%q has an invalid port %q (want 1-65535)", addr, port)
	}
	return nil
}

func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		writeError(w, http.StatusUnsupportedMediaType, "request body must be application/json", 0)
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodySize))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		msg := "invalid JSON body: " + err.Error()
		if errors.Is(err, io.EOF) {
			msg = "request body is empty (want a JSON object)"
		}
		writeError(w, http.StatusBadRequest, msg, 0)
		return false
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, "invalid JSON body: trailing data after the object", 0)
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		code = http.StatusInternalServerError
		b, _ = json.Marshal(ErrorResponse{Error: "encoding response: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, code int, msg string, leader uint64) {
	writeJSON(w, code, ErrorResponse{Error: msg, Leader: leader})
}

type statusRecorder struct {
	http.ResponseWriter
	code        int
	wroteHeader bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wroteHeader {
		r.code = code
		r.wroteHeader = true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	r.wroteHeader = true
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// registerOrIgnore registers c, tolerating an identical collector already
// being registered (several admin servers may share a registry). It returns
// the collector in use.
func registerOrIgnore(reg prometheus.Registerer, c prometheus.Collector) prometheus.Collector {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			return are.ExistingCollector
		}
		// A conflicting (not identical) collector: keep c unregistered.
	}
	return c
}

type slogPromLogger struct{ l *slog.Logger }

func (p slogPromLogger) Println(v ...any) {
	p.l.Warn("admin: metrics: " + strings.TrimSuffix(fmt.Sprintln(v...), "\n"))
}
