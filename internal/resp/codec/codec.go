package codec

import (
	"bytes"
	"errors"
	"io"
	"math"
	"strconv"
)

// Limits bound what one command frame may contain. The parser refuses a frame
// beyond them with a protocol error as soon as the offending header is read,
// before buffering the data it announces. Zero fields take the defaults.
//
// Key and value sizes are not the codec's concern: kv.Check enforces them
// per command. The codec only protects the process from frames it could not
// afford to buffer.
type Limits struct {
	// MaxArgs is the largest argument count of one command (default 1 Mi).
	MaxArgs int
	// MaxBulkLen is the largest single bulk argument in bytes (default
	// MaxFrameSize). A larger "$len" header is refused like Redis refuses
	// one beyond proto-max-bulk-len: "invalid bulk length".
	MaxBulkLen int
	// MaxFrameSize is the largest whole command frame in bytes, headers
	// included (default 128 MiB).
	MaxFrameSize int
	// MaxInlineLen is the longest inline command line and the longest
	// header line of a multibulk frame (default 64 KiB, Redis's
	// PROTO_INLINE_MAX_SIZE).
	MaxInlineLen int
}

// Default limits.
const (
	DefaultMaxArgs      = 1 << 20
	DefaultMaxFrameSize = 128 << 20
	DefaultMaxInlineLen = 64 << 10
)

// WithDefaults returns l with zero fields replaced by the defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxArgs <= 0 {
		l.MaxArgs = DefaultMaxArgs
	}
	if l.MaxFrameSize <= 0 {
		l.MaxFrameSize = DefaultMaxFrameSize
	}
	if l.MaxBulkLen <= 0 || l.MaxBulkLen > l.MaxFrameSize {
		l.MaxBulkLen = l.MaxFrameSize
	}
	if l.MaxInlineLen <= 0 {
		l.MaxInlineLen = DefaultMaxInlineLen
	}
	return l
}

// ProtocolError is a malformed or oversized frame. Its text is the complete
// error reply, code included ("ERR Protocol error: ..."). After one the
// connection must be closed: the stream position is lost.
type ProtocolError struct {
	Msg string
}

func (e *ProtocolError) Error() string { return e.Msg }

func protoErr(msg string) error { return &ProtocolError{Msg: "ERR Protocol error: " + msg} }

// The protocol errors whose text Redis defines.
var (
	ErrInvalidMultibulkLength = protoErr("invalid multibulk length")
	ErrInvalidBulkLength      = protoErr("invalid bulk length")
	ErrTooBigInline           = protoErr("too big inline request")
	ErrTooBigMbulkCount       = protoErr("too big mbulk count string")
	ErrTooBigBulkCount        = protoErr("too big bulk count string")
	ErrUnbalancedQuotes       = protoErr("unbalanced quotes in request")
	// ErrBulkTerminator has no Redis equivalent: Redis skips the two bytes
	// after bulk data unchecked; kvorum refuses anything but CRLF, since a
	// wrong terminator means the client and server disagree on framing.
	ErrBulkTerminator = protoErr("expected CRLF after bulk argument")
)

func errExpectedDollar(c byte) error {
	return &ProtocolError{Msg: "ERR Protocol error: expected '$', got '" + string([]byte{c}) + "'"}
}

func errFrameTooLarge(n int64, limit int) error {
	return &ProtocolError{Msg: "ERR Protocol error: command frame too large (" +
		strconv.FormatInt(n, 10) + " bytes, limit " + strconv.Itoa(limit) + ")"}
}

func errTooManyArgs(n int64, limit int) error {
	return &ProtocolError{Msg: "ERR Protocol error: too many arguments (" +
		strconv.FormatInt(n, 10) + ", limit " + strconv.Itoa(limit) + ")"}
}

// errIncomplete is the internal signal of a non-blocking parse that ran out
// of buffered bytes.
var errIncomplete = errors.New("resp: incomplete command")

const (
	initialBufSize = 4 << 10
	// Memory kept across batches; anything bigger is dropped after Release so
	// that idle connections stay cheap.
	keepArena = 64 << 10
	keepArgv  = 1024
	// Bulk data at least this long is read straight into the arena instead
	// of through the read buffer.
	directReadMin = initialBufSize
)

// Reader parses commands from a byte stream: RESP multibulk frames
// ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n") and inline commands ("GET k\r\n",
// quoted like redis-cli). It reads from the underlying reader in chunks into
// a small buffer (4 KiB, growing only for long lines) and copies argument
// bytes into an arena as they arrive, so memory follows the data received,
// never a length a client announced.
//
// Arguments returned by ReadCommand and TryReadCommand stay valid until
// Release is called; commands of one pipeline batch can therefore be held
// together. A Reader is not safe for concurrent use.
type Reader struct {
	rd   io.Reader
	lim  Limits
	buf  []byte
	r, w int
	err  error // sticky read error

	arena []byte   // argument bytes of commands returned since Release
	argv  [][]byte // argument headers of commands returned since Release
	frame int      // bytes of the frame being parsed
}

// NewReader returns a Reader over rd with the given limits (zero fields take
// the defaults).
func NewReader(rd io.Reader, lim Limits) *Reader {
	return &Reader{rd: rd, lim: lim.WithDefaults()}
}

// Reset discards all state and reads from rd, keeping allocated memory.
func (r *Reader) Reset(rd io.Reader) {
	r.rd, r.err = rd, nil
	r.r, r.w = 0, 0
	r.Release()
}

// Limits returns the effective limits.
func (r *Reader) Limits() Limits { return r.lim }

// SetMaxBulkLen changes the largest bulk argument for the frames read
// from now on (at most MaxFrameSize; n <= 0: MaxFrameSize).
func (r *Reader) SetMaxBulkLen(n int) {
	if n <= 0 || n > r.lim.MaxFrameSize {
		n = r.lim.MaxFrameSize
	}
	r.lim.MaxBulkLen = n
}

// Buffered returns the number of bytes read from the stream but not yet
// parsed: a non-zero value means more pipelined input is already here.
func (r *Reader) Buffered() int { return r.w - r.r }

// Pending returns the bytes of argument data held for the commands returned
// since the last Release.
func (r *Reader) Pending() int { return len(r.arena) }

// Release invalidates every argument returned so far and recycles their
// memory (unless it grew large, in which case it is dropped).
func (r *Reader) Release() {
	if cap(r.arena) > keepArena {
		r.arena = nil
	} else {
		r.arena = r.arena[:0]
	}
	if cap(r.argv) > keepArgv {
		r.argv = nil
	} else {
		clear(r.argv)
		r.argv = r.argv[:0]
	}
	// Shrink a read buffer that grew for a long line once it is drained.
	if r.r == r.w && cap(r.buf) > initialBufSize {
		r.buf = nil
		r.r, r.w = 0, 0
	}
}

// ReadCommand reads the next command, blocking until it is complete. Empty
// commands (an empty inline line, "*0") are skipped. At a clean end of
// stream it returns io.EOF; in the middle of a frame io.ErrUnexpectedEOF.
// A *ProtocolError means the stream is unusable.
func (r *Reader) ReadCommand() ([][]byte, error) {
	return r.next(true)
}

// TryReadCommand parses the next command only if it is entirely buffered;
// it never reads from the stream. ok is false if no complete command is
// buffered (the partial bytes stay for the next ReadCommand). A protocol
// error is returned as soon as the buffered bytes prove the frame invalid.
func (r *Reader) TryReadCommand() (args [][]byte, ok bool, err error) {
	pos, na, nv := r.r, len(r.arena), len(r.argv)
	args, err = r.next(false)
	if err == errIncomplete {
		r.r, r.arena, r.argv = pos, r.arena[:na], r.argv[:nv]
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return args, true, nil
}

func (r *Reader) next(block bool) ([][]byte, error) {
	for {
		if r.r == r.w {
			if !block {
				return nil, errIncomplete
			}
			if err := r.fill(); err != nil {
				return nil, err
			}
			continue
		}
		r.frame = 0
		var args [][]byte
		var err error
		if r.buf[r.r] == '*' {
			args, err = r.multibulk(block)
		} else {
			args, err = r.inline(block)
		}
		if err != nil {
			return nil, err
		}
		if len(args) > 0 {
			return args, nil
		}
	}
}

// fill reads more bytes into the buffer, compacting it first and growing it
// only when it is full of one unfinished line.
func (r *Reader) fill() error {
	if r.err != nil {
		return r.err
	}
	if r.buf == nil {
		r.buf = make([]byte, initialBufSize)
	}
	if r.r > 0 {
		n := copy(r.buf, r.buf[r.r:r.w])
		r.r, r.w = 0, n
	}
	if r.w == len(r.buf) {
		// Only lines make the buffer full (bulk data streams through it),
		// and line() refuses lines longer than MaxInlineLen before asking
		// for more, so the buffer never outgrows about twice that limit.
		nb := make([]byte, 2*len(r.buf))
		copy(nb, r.buf[:r.w])
		r.buf = nb
	}
	for range 100 {
		n, err := r.rd.Read(r.buf[r.w:])
		r.w += n
		if err != nil {
			r.err = err
			if n > 0 {
				return nil
			}
			return err
		}
		if n > 0 {
			return nil
		}
	}
	r.err = io.ErrNoProgress
	return r.err
}

// more is fill inside a frame: EOF there is unexpected.
func (r *Reader) more() error {
	err := r.fill()
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// line returns the next line up to '\n' (exclusive; a '\r' before it is
// kept) and consumes it. The slice is valid until the next fill.
func (r *Reader) line(block bool, tooBig error) ([]byte, error) {
	max := r.lim.MaxInlineLen
	scanned := 0
	for {
		if i := bytes.IndexByte(r.buf[r.r+scanned:r.w], '\n'); i >= 0 {
			end := r.r + scanned + i
			if end-r.r > max+1 { // +1: the '\r'
				return nil, tooBig
			}
			l := r.buf[r.r:end]
			r.r = end + 1
			return l, nil
		}
		scanned = r.w - r.r
		if scanned > max+1 {
			return nil, tooBig
		}
		if !block {
			return nil, errIncomplete
		}
		if err := r.more(); err != nil {
			return nil, err
		}
	}
}

func (r *Reader) multibulk(block bool) ([][]byte, error) {
	l, err := r.line(block, ErrTooBigMbulkCount)
	if err != nil {
		return nil, err
	}
	r.frame += len(l) + 1
	n, ok := parseLen(l[1:])
	if !ok || n > math.MaxInt32 {
		return nil, ErrInvalidMultibulkLength
	}
	if n <= 0 {
		return nil, nil // like Redis: "*0" and "*-1" are no command
	}
	if n > int64(r.lim.MaxArgs) {
		return nil, errTooManyArgs(n, r.lim.MaxArgs)
	}
	start := len(r.argv)
	for range n {
		l, err := r.line(block, ErrTooBigBulkCount)
		if err != nil {
			return nil, err
		}
		if len(l) == 0 {
			return nil, errExpectedDollar('\n')
		}
		if l[0] != '$' {
			return nil, errExpectedDollar(l[0])
		}
		size, ok := parseLen(l[1:])
		if !ok || size < 0 {
			return nil, ErrInvalidBulkLength
		}
		r.frame += len(l) + 1
		total := int64(math.MaxInt64) // saturate instead of overflowing
		if size <= math.MaxInt64-int64(r.frame)-2 {
			total = int64(r.frame) + size + 2
		}
		if total > int64(r.lim.MaxFrameSize) {
			return nil, errFrameTooLarge(total, r.lim.MaxFrameSize)
		}
		if size > int64(r.lim.MaxBulkLen) {
			return nil, ErrInvalidBulkLength
		}
		r.frame += int(size) + 2
		arg, err := r.bulk(block, int(size))
		if err != nil {
			return nil, err
		}
		r.argv = append(r.argv, arg)
	}
	end := len(r.argv)
	return r.argv[start:end:end], nil
}

// bulk reads size bytes of bulk data plus CRLF into the arena.
func (r *Reader) bulk(block bool, size int) ([]byte, error) {
	start := len(r.arena)
	if r.w-r.r >= size+2 {
		d := r.buf[r.r : r.r+size+2]
		if d[size] != '\r' || d[size+1] != '\n' {
			return nil, ErrBulkTerminator
		}
		r.arena = append(r.arena, d[:size]...)
		r.r += size + 2
		return r.arena[start : start+size : start+size], nil
	}
	if !block {
		return nil, errIncomplete
	}
	rem := size
	for rem > 0 {
		if r.r < r.w {
			n := min(rem, r.w-r.r)
			r.arena = append(r.arena, r.buf[r.r:r.r+n]...)
			r.r += n
			rem -= n
			continue
		}
		if rem < directReadMin {
			if err := r.more(); err != nil {
				return nil, err
			}
			continue
		}
		// Large data: read straight into the arena, growing it as data
		// arrives (about doubling), never by the announced size at once.
		if cap(r.arena)-len(r.arena) == 0 {
			grow := min(rem, max(len(r.arena), 16<<10))
			r.arena = append(r.arena[:cap(r.arena)], make([]byte, grow)...)[:len(r.arena)]
		}
		if r.err != nil {
			return nil, unexpected(r.err)
		}
		spare := r.arena[len(r.arena):min(cap(r.arena), len(r.arena)+rem)]
		n, err := r.rd.Read(spare)
		r.arena = r.arena[:len(r.arena)+n]
		rem -= n
		if err != nil {
			r.err = err
			if rem > 0 {
				return nil, unexpected(err)
			}
		}
	}
	for r.w-r.r < 2 {
		if err := r.more(); err != nil {
			return nil, err
		}
	}
	if r.buf[r.r] != '\r' || r.buf[r.r+1] != '\n' {
		return nil, ErrBulkTerminator
	}
	r.r += 2
	return r.arena[start : start+size : start+size], nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// ParseInt parses a command argument as strictly as Redis's string2ll:
// decimal, an optional '-', no '+', no leading zeros, no spaces.
func ParseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	return parseLen(append(b[:len(b):len(b)], '\r'))
}

// parseLen parses the number of a "*n" or "$n" header line (without the
// type byte, with its trailing '\r') as strictly as Redis's string2ll: an
// optional '-', no '+', no leading zeros, no spaces.
func parseLen(b []byte) (int64, bool) {
	if len(b) < 2 || b[len(b)-1] != '\r' {
		return 0, false
	}
	b = b[:len(b)-1]
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	neg := false
	if b[0] == '-' {
		neg = true
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 || b[0] < '1' || b[0] > '9' {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if v > math.MaxInt64 {
		return 0, false
	}
	if neg {
		return -int64(v), true
	}
	return int64(v), true
}

// inline parses one inline command line, split into words as SplitArgs
// splits it (Redis's sdssplitargs).
func (r *Reader) inline(block bool) ([][]byte, error) {
	l, err := r.line(block, ErrTooBigInline)
	if err != nil {
		return nil, err
	}
	r.frame = len(l) + 1
	if r.frame > r.lim.MaxFrameSize {
		return nil, errFrameTooLarge(int64(r.frame), r.lim.MaxFrameSize)
	}
	if n := len(l); n > 0 && l[n-1] == '\r' {
		l = l[:n-1]
	}
	start := len(r.argv)
	for p := skipSpace(l, 0); p < len(l); p = skipSpace(l, p) {
		if len(r.argv)-start >= r.lim.MaxArgs {
			return nil, errTooManyArgs(int64(len(r.argv)-start+1), r.lim.MaxArgs)
		}
		a := len(r.arena)
		r.arena, p, err = appendWord(r.arena, l, p)
		if err != nil {
			return nil, err
		}
		r.argv = append(r.argv, r.arena[a:len(r.arena):len(r.arena)])
	}
	end := len(r.argv)
	return r.argv[start:end:end], nil
}

// SplitArgs splits line into words as Redis's sdssplitargs does, the way
// inline commands are split: words separated by space, tab, CR or LF; a
// word may hold double-quoted parts, with the escapes \n \r \t \b \a \xHH
// and \<c> for c, and single-quoted parts, with \' only. A quote left
// open, or a closing quote followed by anything but a space, is
// ErrUnbalancedQuotes. All of line is split, NUL bytes included (C's
// sdssplitargs stops at the first NUL).
func SplitArgs(line []byte) ([][]byte, error) {
	var words [][]byte
	for p := skipSpace(line, 0); p < len(line); p = skipSpace(line, p) {
		var w []byte
		var err error
		if w, p, err = appendWord(nil, line, p); err != nil {
			return nil, err
		}
		words = append(words, w)
	}
	return words, nil
}

// skipSpace returns the position of the first byte of l at or after p that
// is not a space, or len(l).
func skipSpace(l []byte, p int) int {
	for p < len(l) && isSpace(l[p]) {
		p++
	}
	return p
}

// appendWord appends to dst the word of l that starts at p (not a space),
// its quotes and escapes resolved as SplitArgs says. It returns dst and
// where the next word may start: after the blank that ended this one.
func appendWord(dst, l []byte, p int) ([]byte, int, error) {
	inq, insq := false, false
	for ; ; p++ {
		switch {
		case inq:
			if p == len(l) {
				return dst, p, ErrUnbalancedQuotes
			}
			c := l[p]
			switch {
			case c == '\\' && p+3 < len(l) && l[p+1] == 'x' && isHex(l[p+2]) && isHex(l[p+3]):
				dst = append(dst, unhex(l[p+2])<<4|unhex(l[p+3]))
				p += 3
			case c == '\\' && p+1 < len(l):
				p++
				switch c = l[p]; c {
				case 'n':
					c = '\n'
				case 'r':
					c = '\r'
				case 't':
					c = '\t'
				case 'b':
					c = '\b'
				case 'a':
					c = '\a'
				}
				dst = append(dst, c)
			case c == '"':
				p, err := closeQuote(l, p)
				return dst, p, err
			default:
				dst = append(dst, c)
			}
		case insq:
			if p == len(l) {
				return dst, p, ErrUnbalancedQuotes
			}
			c := l[p]
			switch {
			case c == '\\' && p+1 < len(l) && l[p+1] == '\'':
				p++
				dst = append(dst, '\'')
			case c == '\'':
				p, err := closeQuote(l, p)
				return dst, p, err
			default:
				dst = append(dst, c)
			}
		default:
			if p == len(l) {
				return dst, p, nil
			}
			switch c := l[p]; c {
			case ' ', '\n', '\r', '\t':
				return dst, p + 1, nil
			case '"':
				inq = true
			case '\'':
				insq = true
			default:
				dst = append(dst, c)
			}
		}
	}
}

// closeQuote checks the quote that closes a word at l[p]: the word must end
// there. It returns the position after the quote.
func closeQuote(l []byte, p int) (int, error) {
	if p+1 < len(l) && !isSpace(l[p+1]) {
		return p, ErrUnbalancedQuotes
	}
	return p + 1, nil
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// AppendCommand appends args encoded as a RESP multibulk frame, the form
// clients send.
func AppendCommand(b []byte, args ...[]byte) []byte {
	b = AppendHeader(b, '*', int64(len(args)))
	for _, a := range args {
		b = AppendHeader(b, '$', int64(len(a)))
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

// AppendHeader appends a frame header: the type byte c and the count n.
func AppendHeader(b []byte, c byte, n int64) []byte {
	b = append(b, c)
	b = strconv.AppendInt(b, n, 10)
	return append(b, '\r', '\n')
}

// AppendBulk appends s as a bulk string.
func AppendBulk(b, s []byte) []byte {
	b = AppendHeader(b, '$', int64(len(s)))
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// AppendSimple writes a status or error line. CR and LF would end the line
// early and desynchronise the client, so they become spaces, as Redis does.
func AppendSimple(b []byte, c byte, s []byte) []byte {
	b = append(b, c)
	start := len(b)
	b = append(b, s...)
	for i := start; i < len(b); i++ {
		if b[i] == '\r' || b[i] == '\n' {
			b[i] = ' '
		}
	}
	return append(b, '\r', '\n')
}

// AppendDouble appends f formatted like Redis 7.0 formats doubles in
// replies: C's "%.17g", with "inf", "-inf" and "nan" spelled out.
func AppendDouble(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "nan"...)
	case math.IsInf(f, 1):
		return append(b, "inf"...)
	case math.IsInf(f, -1):
		return append(b, "-inf"...)
	case f == 0:
		if math.Signbit(f) {
			return append(b, "-0"...)
		}
		return append(b, '0')
	}
	// %.17g: 17 significant digits; exponent form when the decimal
	// exponent X is < -4 or >= 17; trailing zeros removed.
	var tmp [40]byte
	e := strconv.AppendFloat(tmp[:0], f, 'e', 16, 64) // [-]d.dddddddddddddddde±XX
	i := len(e) - 1
	for e[i] != 'e' {
		i--
	}
	x, _ := strconv.Atoi(string(e[i+1:]))
	if x < -4 || x >= 17 {
		mant := trimZeros(e[:i])
		b = append(b, mant...)
		return append(b, e[i:]...) // Go, like C, writes at least two exponent digits
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, 'f', 16-x, 64)
	return append(b[:start], trimZeros(b[start:])...)
}

// trimZeros removes trailing fractional zeros and a trailing point.
func trimZeros(s []byte) []byte {
	dot := false
	for _, c := range s {
		if c == '.' {
			dot = true
			break
		}
	}
	if !dot {
		return s
	}
	for s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	if s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	return s
}
