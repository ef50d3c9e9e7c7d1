package acl

import (
	"time"
)

// Context is where a refused command ran (Redis's ACL_LOG_CTX_*).
type Context uint8

const (
	ContextToplevel Context = 0
	ContextLua      Context = 1
	ContextMulti    Context = 2
	ContextModule   Context = 3
)

// String is the context field of an ACL LOG entry.
func (c Context) String() string {
	switch c {
	case ContextToplevel:
		return "toplevel"
	case ContextMulti:
		return "multi"
	case ContextLua:
		return "lua"
	case ContextModule:
		return "module"
	}
	return "unknown"
}

// LogEntry is one ACL LOG entry.
type LogEntry struct {
	// Count is how many equal events the entry stands for.
	Count int64
	// Reason is why: DeniedCommand, DeniedKey, DeniedChannel, DeniedAuth
	// (Reason.LogReason() is the reply's text).
	Reason  Denial
	Context Context
	// Object is the command's full name (DeniedCommand), the key or the
	// channel (DeniedKey, DeniedChannel), or the command name as the
	// client sent it, "AUTH" or "HELLO" (DeniedAuth).
	Object string
	// Username is the user the client is authenticated as, or for
	// DeniedAuth the username that failed.
	Username string
	// ClientInfo is the last event's CLIENT LIST line of the client.
	ClientInfo string
	// Created is the first event's time, Updated the last's (age-seconds
	// in Redis 7.0's reply counts from Updated).
	Created, Updated time.Time
	// ID numbers entries from 0 in the order they were created (Redis 7.2
	// replies it as entry-id, with timestamp-created and
	// timestamp-last-updated; 7.0.15 has none of the three).
	ID int64
}

// AgeSeconds is the entry's age-seconds field at now.
func (e *LogEntry) AgeSeconds(now time.Time) float64 {
	return float64(now.Sub(e.Updated).Milliseconds()) / 1000
}

// logGroupingWindow is ACL_LOG_GROUPING_MAX_TIME_DELTA.
const logGroupingWindow = 60 * time.Second

// DefaultLogMaxLen is acllog-max-len's default.
const DefaultLogMaxLen = 128

// Log is the ACL LOG: newest first, at most MaxLen entries. An event
// equal to one of the 10 newest entries (same reason, context, object
// and username, last updated within 60 s of it) bumps that entry's count,
// takes its client info and time and moves it to the front instead of
// adding one (addACLLogEntry). Time is given by the caller. Not safe for
// concurrent use.
type Log struct {
	// MaxLen is acllog-max-len: adding beyond it drops the oldest
	// entries.
	MaxLen  int
	entries []*LogEntry // newest first
	nextID  int64
}

// NewLog returns an empty log keeping at most maxLen entries.
func NewLog(maxLen int) *Log { return &Log{MaxLen: maxLen} }

// Add records an event: e's Reason, Context, Object, Username and
// ClientInfo; now is its time.
func (l *Log) Add(e LogEntry, now time.Time) {
	for i, cur := range l.entries {
		if i == 10 {
			break
		}
		d := now.UnixMilli() - cur.Updated.UnixMilli() // Redis's mstime
		if d < 0 {
			d = -d
		}
		if cur.Reason != e.Reason || cur.Context != e.Context || d > logGroupingWindow.Milliseconds() || cur.Object != e.Object || cur.Username != e.Username {
			continue
		}
		copy(l.entries[1:i+1], l.entries[:i])
		l.entries[0] = cur
		cur.ClientInfo = e.ClientInfo
		cur.Updated = now
		cur.Count++
		return
	}
	ne := e
	ne.Count, ne.Created, ne.Updated, ne.ID = 1, now, now, l.nextID
	l.nextID++
	l.entries = append([]*LogEntry{&ne}, l.entries...)
	if len(l.entries) > l.MaxLen {
		for i := max(l.MaxLen, 0); i < len(l.entries); i++ {
			l.entries[i] = nil
		}
		l.entries = l.entries[:max(l.MaxLen, 0)]
	}
}

// Entries is ACL LOG [count]: copies of the newest count entries
// (Redis's default count is 10; a negative count is 0).
func (l *Log) Entries(count int) []LogEntry {
	count = min(max(count, 0), len(l.entries))
	out := make([]LogEntry, count)
	for i := range out {
		out[i] = *l.entries[i]
	}
	return out
}

// Len is the number of entries.
func (l *Log) Len() int { return len(l.entries) }

// Reset is ACL LOG RESET: the log is emptied (entry IDs go on).
func (l *Log) Reset() { l.entries = nil }

// EntryFor is the entry addACLLogEntry makes for a command refused by a
// check (Check's Denial and position) in context ctx, run by username:
// the object is the command's full name, or the refused key or channel.
// ClientInfo is the caller's.
func EntryFor(username string, cmd *Command, args [][]byte, d Denial, pos int, ctx Context) LogEntry {
	e := LogEntry{Reason: d, Context: ctx, Username: username}
	switch d {
	case DeniedCommand:
		e.Object = cmd.Name
	case DeniedKey, DeniedChannel:
		if pos >= 0 && pos < len(args) {
			e.Object = string(args[pos])
		}
	}
	return e
}

// AuthEntryFor is the entry of a failed AUTH or HELLO AUTH: the object
// is the command name as the client sent it (args[0]: "AUTH", "hello"),
// the username the one that failed ("default" for AUTH <password>).
func AuthEntryFor(username string, commandName []byte, ctx Context) LogEntry {
	return LogEntry{Reason: DeniedAuth, Context: ctx, Object: string(commandName), Username: username}
}
