package reply

// Redis's error texts that several packages format.

// UnknownCommand is Redis 7's reply for an unknown command: the name and
// the first arguments, quoted, cut at 128 bytes like Redis does.
func UnknownCommand(args [][]byte) Reply {
	b := make([]byte, 0, 256)
	b = append(b, "ERR unknown command '"...)
	b = AppendCString(b, args[0], 128)
	b = append(b, "', with args beginning with: "...)
	quoted := 0 // Redis bounds the length of the quoted list, not of the whole text
	for _, a := range args[1:] {
		if quoted >= 128 {
			break
		}
		n := len(b)
		b = append(b, '\'')
		b = AppendCString(b, a, 128-quoted)
		b = append(b, '\'', ' ')
		quoted += len(b) - n
	}
	return ErrorText(b)
}

// AppendCString appends at most max bytes of s, stopping at a NUL byte as
// C's "%.*s" does.
func AppendCString(b, s []byte, max int) []byte {
	for i, c := range s {
		if c == 0 || i >= max {
			break
		}
		b = append(b, c)
	}
	return b
}

// ErrorText is an error reply of the text b (code first), with CR and LF
// replaced by spaces, as Redis does for every error it formats, so the
// reply stays one RESP line. It may change b in place.
func ErrorText(b []byte) Reply {
	for i, c := range b {
		if c == '\r' || c == '\n' {
			b[i] = ' '
		}
	}
	return Reply{Kind: KindError, Str: b}
}

// Redis's most common argument errors, for the packages that parse
// command arguments.
var (
	ErrSyntax = Error("ERR syntax error")
	ErrNotInt = Error("ERR value is not an integer or out of range")
)
