package kv

import "errors"

// Errors and replies. A command returns a Reply; what goes wrong below it
// (a loader finding a key of another type, Pebble failing) comes back as a
// Go error, and errReply is the one place such an error becomes the
// command's reply.

// replyError is an error that is also a Redis error reply: a loader
// returns one (errTypeMismatch) where Redis answers before doing anything.
type replyError struct{ r Reply }

func (e *replyError) Error() string { return string(e.r.Str) }

// errTypeMismatch is returned by the loaders for a key holding another
// type; its reply is WRONGTYPE.
var errTypeMismatch error = &replyError{errWrongType}

// errReply turns an error into the command's reply: the Redis reply a
// replyError carries, or "ERR storage: ..." for anything else (a failed
// Pebble read or write).
func errReply(err error) Reply {
	if re := (*replyError)(nil); errors.As(err, &re) {
		return re.r
	}
	return Error("ERR storage: " + err.Error())
}

// errOr is the reply of a command that ends early, after a lookup that
// failed (err) or found nothing: errReply(err) if err is not nil, else r.
func errOr(err error, r Reply) Reply {
	if err != nil {
		return errReply(err)
	}
	return r
}
