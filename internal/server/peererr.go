package server

import (
	"context"
	"encoding/binary"
	"errors"
	"io/fs"
	"syscall"

	"github.com/kvorum/kvorum/internal/admin"
	"github.com/kvorum/kvorum/internal/storage"
	"github.com/kvorum/kvorum/internal/store"
	"github.com/kvorum/kvorum/internal/transport"
)

// Errors on the peer wire.
//
// A follower forwards client writes (methodExec, over the transport's
// pipelined call stream, CallPipelined) and membership changes (methodJoin,
// methodRemoveMember, methodTransferLeader, over its unary Call) to the
// leader. An error of the leader's handler crosses back
// as a code and its fields, and the follower rebuilds the same typed error:
// both ends match errors with errors.Is and errors.As, never by their text.
// The encoding travels
//
//	in an exec response: code 0 (ok) then the replies, or an encoded error;
//	with a call error:   the encoded error is the transport.WireError detail
//	                     of the call's gRPC status (whose message is the
//	                     error's text, for a peer that ignores details).
//
// An encoded error is one code byte, then the code's fields: integers as
// uvarints, strings as uvarint length + bytes. Fields in brackets are
// optional (absent in frames of nodes older than typed errors).
//
//	1 not leader     leader [range, leader address, message]
//	2..3, 5..18      [message]; the sentinel is the code's entry in wireSentinels
//	4 text           the error's text, to the end (an error with no code)
//	19 storage       errno, op, path, cause text [message]: a *store.StorageError
//	20..22           [message]: the split errors, as 2..18
//	23               [message]: a write the store's gate refused (disk full), as 2..18
//
// message is the error's text where it says more than the bare typed error
// (a sentinel wrapped with context, "add learner 4: store: ..."): the
// rebuilt error reads as that text and unwraps to the typed error. Absent or
// empty, the rebuilt error is the typed error itself (for a sentinel, the
// very value: == holds).
//
// Rolling restarts: codes 0 to 4 and their leading fields are what every
// version sent, and a decoder ignores fields it does not know at the end of
// a frame; an older node reads an unknown code as text (in an exec response
// that becomes an UNCERTAIN reply: never a success, never a retry). New codes
// are appended, never renumbered.
const (
	codeOK        byte = 0 // exec responses only: the replies follow
	codeNotLeader byte = 1
	codeText      byte = 4
	codeStorage   byte = 19
)

// wireSentinels are the sentinel errors that cross the peer wire, by code.
// Encoding takes the first entry err matches with errors.Is, after
// NotLeaderError and StorageError.
var wireSentinels = []struct {
	code byte
	err  error
}{
	{2, store.ErrProposalDropped},
	{3, store.ErrAmbiguous},
	{5, store.ErrNoLeader},
	{6, store.ErrStopped},
	{7, store.ErrLeaderChanged},
	{8, store.ErrMemberExists},
	{9, store.ErrMemberNotFound},
	{10, admin.ErrNotLeader},
	{11, admin.ErrNoLeader},
	{12, admin.ErrUnknownMember},
	{13, admin.ErrMemberExists},
	{14, admin.ErrInvalid},
	{15, admin.ErrBusy},
	{16, admin.ErrStopped},
	{17, context.DeadlineExceeded},
	{18, context.Canceled},
	{20, store.ErrSplitStaleGeneration},
	{21, store.ErrSplitSlotOutside},
	{22, store.ErrSplitRangeExists},
	{23, store.ErrWriteRefused},
}

// appendError appends the encoding of err (not nil) to b.
func appendError(b []byte, err error) []byte {
	var nle *store.NotLeaderError
	if errors.As(err, &nle) {
		b = append(b, codeNotLeader)
		b = binary.AppendUvarint(b, nle.Leader)
		b = binary.AppendUvarint(b, uint64(nle.Range))
		b = appendString(b, nle.LeaderAddr)
		return appendMessage(b, err, nle)
	}
	var se *store.StorageError
	if errors.As(err, &se) {
		var errno syscall.Errno
		var op, path string
		if se.Err != nil {
			errors.As(se.Err, &errno)
			var pe *fs.PathError
			if errors.As(se.Err, &pe) {
				op, path = pe.Op, pe.Path
			}
		}
		cause := ""
		if se.Err != nil {
			cause = se.Err.Error()
		}
		b = append(b, codeStorage)
		b = binary.AppendUvarint(b, uint64(errno))
		b = appendString(b, op)
		b = appendString(b, path)
		b = appendString(b, cause)
		return appendMessage(b, err, se)
	}
	for _, s := range wireSentinels {
		if errors.Is(err, s.err) {
			return appendMessage(append(b, s.code), err, s.err)
		}
	}
	return append(append(b, codeText), err.Error()...)
}

// appendMessage appends err's text if it differs from that of typed, the
// error the code stands for.
func appendMessage(b []byte, err, typed error) []byte {
	if msg := err.Error(); msg != typed.Error() {
		return appendString(b, msg)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decodeError rebuilds the error appendError encoded in b; ok is false if b
// is not a well-formed encoded error.
func decodeError(b []byte) (err error, ok bool) {
	if len(b) == 0 || b[0] == codeOK {
		return nil, false
	}
	code, r := b[0], wireReader{b: b[1:]}
	var typed error
	switch code {
	case codeText:
		return errors.New(string(r.b)), true
	case codeNotLeader:
		// The range is the one the sender encoded; a frame without it is
		// from a node older than ranges in errors, which had range 1 only.
		nle := &store.NotLeaderError{Range: firstRange, Leader: r.uvarint()}
		if r.more() {
			nle.Range = storage.RangeID(r.uvarint())
			nle.LeaderAddr = r.string()
		}
		typed = nle
	case codeStorage:
		errno := syscall.Errno(r.uvarint())
		op, path, text := r.string(), r.string(), r.string()
		var cause error
		switch {
		case op != "":
			pe := &fs.PathError{Op: op, Path: path, Err: errno}
			if errno == 0 {
				pe.Err = errors.New(text)
			}
			cause = pe
		case errno != 0:
			cause = errno
		}
		typed = &store.StorageError{Err: &remoteError{msg: text, err: cause}}
	default:
		for _, s := range wireSentinels {
			if s.code == code {
				typed = s.err
				break
			}
		}
		if typed == nil {
			// A code from a newer node: keep what can be read of it.
			return errors.New(string(b[1:])), true
		}
	}
	msg := ""
	if r.more() {
		msg = r.string()
	}
	if r.err != nil {
		return nil, false
	}
	if msg != "" && msg != typed.Error() {
		return &remoteError{msg: msg, err: typed}, true
	}
	return typed, true
}

// remoteError is an error rebuilt from the peer wire with the text it had
// on the other node: it reads as that text and unwraps to the typed error
// it carried (nil if none).
type remoteError struct {
	msg string
	err error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.err }

// peerError is a HandleCall error on its way back to the caller: the
// transport sends its encoding along (transport.WireError).
type peerError struct{ err error }

func (e *peerError) Error() string      { return e.err.Error() }
func (e *peerError) Unwrap() error      { return e.err }
func (e *peerError) WireDetail() []byte { return appendError(nil, e.err) }

// wireErr makes err (if any) a peerError.
func wireErr(err error) error {
	if err == nil {
		return nil
	}
	return &peerError{err: err}
}

// callError turns the error of a peer call back into the typed error the
// remote handler returned, when it sent one; other errors (the transport's
// own, a peer that sends no details, a remote error with no code but its
// text, which the gRPC status carries already) are returned unchanged.
func callError(err error) error {
	if d, ok := transport.WireDetail(err); ok && len(d) > 0 && d[0] != codeText {
		if remote, ok := decodeError(d); ok {
			return remote
		}
	}
	return err
}

// wireReader reads the fields of a peer payload (an encoded error, a
// forwarded exec request); the first failure sticks in err.
type wireReader struct {
	b   []byte
	err error
}

func (r *wireReader) more() bool { return r.err == nil && len(r.b) > 0 }

func (r *wireReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errBadPayload
		return 0
	}
	r.b = r.b[n:]
	return v
}

// bytes reads a length-prefixed field; the result shares r's buffer.
func (r *wireReader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = errBadPayload
		return nil
	}
	b := r.b[:n:n]
	r.b = r.b[n:]
	return b
}

func (r *wireReader) string() string { return string(r.bytes()) }
