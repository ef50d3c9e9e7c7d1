package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Backups: GET /v1/backup streams a consistent backup of the node's data
// (see storage.WriteBackup for the format) when the node implements
// BackupAPI. The headers tell the backup's log index and term before the
// body starts.

// BackupAPI is implemented by nodes that can stream backups.
type BackupAPI interface {
	// Backup pins the node's state once it has applied every write
	// committed before the call; the caller streams it with WriteTo and
	// must Close it.
	Backup(ctx context.Context) (Backup, error)
}

// Backup is a pinned backup, ready to stream.
type Backup interface {
	Index() uint64
	Term() uint64
	WriteTo(w io.Writer) (int64, error)
	Close() error
}

// Headers of GET /v1/backup.
const (
	HeaderBackupIndex = "X-Kvorum-Backup-Index"
	HeaderBackupTerm  = "X-Kvorum-Backup-Term"
)

// backupIdle is how long one write of the stream may take: the server's
// WriteTimeout is for ordinary requests, a backup runs as long as it needs
// while the client keeps reading.
const backupIdle = 2 * time.Minute

func (s *Server) backup(w http.ResponseWriter, r *http.Request) {
	bn, ok := s.node.(BackupAPI)
	if !ok {
		writeError(w, http.StatusNotImplemented, "this node cannot stream backups", 0)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	b, err := bn.Backup(ctx)
	cancel()
	if err != nil {
		writeError(w, StatusCode(err), "backup: "+err.Error(), 0)
		return
	}
	defer b.Close()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set(HeaderBackupIndex, strconv.FormatUint(b.Index(), 10))
	h.Set(HeaderBackupTerm, strconv.FormatUint(b.Term(), 10))
	h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="kvorum-%d.backup"`, b.Index()))
	if r.Method == http.MethodHead {
		return
	}
	rc := http.NewResponseController(w)
	if _, err := b.WriteTo(&deadlineWriter{w: w, rc: rc}); err != nil && !errors.Is(err, context.Canceled) {
		// The status line is gone: the client sees a short body, which
		// the backup's checksum refuses.
		s.log.Warn("backup stream failed", "remote", r.RemoteAddr, "err", err)
	}
}

// deadlineWriter moves the connection's write deadline forward as the
// stream progresses.
type deadlineWriter struct {
	w    io.Writer
	rc   *http.ResponseController
	last time.Time
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	if now := time.Now(); now.Sub(d.last) > time.Second {
		d.last = now
		_ = d.rc.SetWriteDeadline(now.Add(backupIdle))
	}
	return d.w.Write(p)
}
