package script

import lua "github.com/yuin/gopher-lua"

// luaMatcher is Lua 5.1's pattern matcher (lstrlib.c), counting its steps
// against the budget: backtracking patterns can take exponential time.
type luaMatcher struct {
	vm       *luaVM
	L        *lua.LState
	src, pat string
	level    int
	caps     [32]struct{ init, len int }
	steps    int
}

const (
	capUnfinished = -1
	capPosition   = -2
)

// p returns the pattern byte at i, 0 past the end (C's terminator).
func (m *luaMatcher) p(i int) byte {
	if i < len(m.pat) {
		return m.pat[i]
	}
	return 0
}

func (m *luaMatcher) s(i int) byte {
	if i < len(m.src) {
		return m.src[i]
	}
	return 0
}

func (m *luaMatcher) step() {
	m.steps++
	if m.steps&15 == 0 {
		m.vm.charge(m.L, 1)
	}
}

func (m *luaMatcher) classEnd(p int) int {
	c := m.p(p)
	p++
	switch c {
	case '%':
		if m.p(p) == 0 {
			m.L.RaiseError("%s", "malformed pattern (ends with '%')")
		}
		return p + 1
	case '[':
		if m.p(p) == '^' {
			p++
		}
		for {
			if m.p(p) == 0 {
				m.L.RaiseError("malformed pattern (missing ']')")
			}
			c := m.p(p)
			p++
			if c == '%' && m.p(p) != 0 {
				p++
			}
			if m.p(p) == ']' {
				return p + 1
			}
		}
	}
	return p
}

func matchClass(c, cl byte) bool {
	var res bool
	switch cl | 0x20 {
	case 'a':
		res = cIsAlpha(c)
	case 'c':
		res = c < 32 || c == 127
	case 'd':
		res = cIsDigit(c)
	case 'l':
		res = c >= 'a' && c <= 'z'
	case 'p':
		res = c > 32 && c < 127 && !cIsAlpha(c) && !cIsDigit(c)
	case 's':
		res = c == ' ' || (c >= '\t' && c <= '\r')
	case 'u':
		res = c >= 'A' && c <= 'Z'
	case 'w':
		res = cIsAlpha(c) || cIsDigit(c)
	case 'x':
		res = cIsDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'f')
	case 'z':
		res = c == 0
	default:
		return cl == c
	}
	if cl >= 'A' && cl <= 'Z' {
		return !res
	}
	return res
}

func cIsAlpha(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

func (m *luaMatcher) matchBracketClass(c byte, p, ec int) bool {
	sig := true
	if m.p(p+1) == '^' {
		sig = false
		p++
	}
	for p++; p < ec; p++ {
		switch {
		case m.p(p) == '%':
			p++
			if matchClass(c, m.p(p)) {
				return sig
			}
		case m.p(p+1) == '-' && p+2 < ec:
			p += 2
			if m.p(p-2) <= c && c <= m.p(p) {
				return sig
			}
		case m.p(p) == c:
			return sig
		}
	}
	return !sig
}

func (m *luaMatcher) singleMatch(c byte, p, ep int) bool {
	switch m.p(p) {
	case '.':
		return true
	case '%':
		return matchClass(c, m.p(p+1))
	case '[':
		return m.matchBracketClass(c, p, ep-1)
	}
	return m.p(p) == c
}

// match returns the end of the match of pattern position p at source
// position s, or -1.
func (m *luaMatcher) match(s, p, depth int) int {
	if depth > maxDepth {
		m.L.RaiseError("pattern too complex")
	}
	depth++
	for {
		m.step()
		switch m.p(p) {
		case '(':
			if m.p(p+1) == ')' {
				return m.startCapture(s, p+2, capPosition, depth)
			}
			return m.startCapture(s, p+1, capUnfinished, depth)
		case ')':
			return m.endCapture(s, p+1, depth)
		case 0:
			return s
		case '$':
			if m.p(p+1) == 0 {
				if s == len(m.src) {
					return s
				}
				return -1
			}
		case '%':
			switch d := m.p(p + 1); {
			case d == 'b':
				if s = m.matchBalance(s, p+2); s < 0 {
					return -1
				}
				p += 4
				continue
			case d == 'f':
				p += 2
				if m.p(p) != '[' {
					m.L.RaiseError("%s", "missing '[' after '%f' in pattern")
				}
				ep := m.classEnd(p)
				var prev byte
				if s > 0 {
					prev = m.src[s-1]
				}
				if m.matchBracketClass(prev, p, ep-1) || !m.matchBracketClass(m.s(s), p, ep-1) {
					return -1
				}
				p = ep
				continue
			case cIsDigit(d):
				if s = m.matchCapture(s, d); s < 0 {
					return -1
				}
				p += 2
				continue
			}
		}
		// default: a single char class, maybe with a quantifier
		ep := m.classEnd(p)
		ok := s < len(m.src) && m.singleMatch(m.src[s], p, ep)
		switch m.p(ep) {
		case '?':
			if ok {
				if r := m.match(s+1, ep+1, depth); r >= 0 {
					return r
				}
			}
			p = ep + 1
			continue
		case '*':
			return m.maxExpand(s, p, ep, depth)
		case '+':
			if !ok {
				return -1
			}
			return m.maxExpand(s+1, p, ep, depth)
		case '-':
			return m.minExpand(s, p, ep, depth)
		}
		if !ok {
			return -1
		}
		s++
		p = ep
	}
}

func (m *luaMatcher) maxExpand(s, p, ep, depth int) int {
	i := 0
	for s+i < len(m.src) && m.singleMatch(m.src[s+i], p, ep) {
		m.step()
		i++
	}
	for ; i >= 0; i-- {
		if r := m.match(s+i, ep+1, depth); r >= 0 {
			return r
		}
	}
	return -1
}

func (m *luaMatcher) minExpand(s, p, ep, depth int) int {
	for {
		if r := m.match(s, ep+1, depth); r >= 0 {
			return r
		}
		if s < len(m.src) && m.singleMatch(m.src[s], p, ep) {
			s++
		} else {
			return -1
		}
	}
}

func (m *luaMatcher) startCapture(s, p, what, depth int) int {
	if m.level >= len(m.caps) {
		m.L.RaiseError("too many captures")
	}
	m.caps[m.level].init = s
	m.caps[m.level].len = what
	m.level++
	r := m.match(s, p, depth)
	if r < 0 {
		m.level--
	}
	return r
}

func (m *luaMatcher) endCapture(s, p, depth int) int {
	l := -1
	for k := m.level - 1; k >= 0; k-- {
		if m.caps[k].len == capUnfinished {
			l = k
			break
		}
	}
	if l < 0 {
		m.L.RaiseError("invalid pattern capture")
	}
	m.caps[l].len = s - m.caps[l].init
	r := m.match(s, p, depth)
	if r < 0 {
		m.caps[l].len = capUnfinished
	}
	return r
}

func (m *luaMatcher) matchBalance(s, p int) int {
	if m.p(p) == 0 || m.p(p+1) == 0 {
		m.L.RaiseError("unbalanced pattern")
	}
	if s >= len(m.src) || m.src[s] != m.p(p) {
		return -1
	}
	b, e, cont := m.p(p), m.p(p+1), 1
	for s++; s < len(m.src); s++ {
		m.step()
		switch m.src[s] {
		case e:
			cont--
			if cont == 0 {
				return s + 1
			}
		case b:
			cont++
		}
	}
	return -1
}

func (m *luaMatcher) matchCapture(s int, d byte) int {
	l := int(d) - '1'
	if l < 0 || l >= m.level || m.caps[l].len == capUnfinished {
		m.L.RaiseError("invalid capture index")
	}
	c := m.caps[l]
	if len(m.src)-s >= c.len && m.src[c.init:c.init+c.len] == m.src[s:s+c.len] {
		m.vm.charge(m.L, int64(c.len/16))
		return s + c.len
	}
	return -1
}

// capture returns capture i of a match [s, e) (the whole match if there
// are no captures and i is 0).
func (m *luaMatcher) capture(i, s, e int) lua.LValue {
	if i >= m.level {
		if i == 0 {
			return lua.LString(m.src[s:e])
		}
		m.L.RaiseError("invalid capture index")
	}
	c := m.caps[i]
	switch c.len {
	case capUnfinished:
		m.L.RaiseError("unfinished capture")
	case capPosition:
		return lua.LNumber(c.init + 1)
	}
	return lua.LString(m.src[c.init : c.init+c.len])
}

// pushCaptures pushes the captures (or the whole match [s, e) if none and
// s >= 0) and returns their number.
func (m *luaMatcher) pushCaptures(s, e int) int {
	n := m.level
	if n == 0 && s >= 0 {
		n = 1
	}
	for i := 0; i < n; i++ {
		m.L.Push(m.capture(i, s, e))
	}
	return n
}
