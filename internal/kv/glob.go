package kv

// globMatch reports whether s matches the glob pattern pat, with the exact
// semantics of Redis 7's stringmatchlen: * ? [abc] [^a] [a-z] and \x
// escapes; an unterminated [ class ends at the end of the pattern.
func globMatch(pat, s []byte, nocase bool) bool {
	skipLonger := false
	return globMatchImpl(pat, s, nocase, &skipLonger, 0)
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// globMatchImpl is a port of stringmatchlen_impl. skipLonger is Redis's
// skipLongerMatches: once a '*' failed to match the rest of s at every
// position, no outer '*' can succeed by consuming more of s either, which
// keeps patterns like "*a*a*a*a*b" linear-ish instead of exponential.
func globMatchImpl(pat, s []byte, nocase bool, skipLonger *bool, nesting int) bool {
	if nesting > 1000 {
		return false
	}
	for len(pat) > 0 && len(s) > 0 {
		switch pat[0] {
		case '*':
			for len(pat) > 1 && pat[1] == '*' {
				pat = pat[1:]
			}
			if len(pat) == 1 {
				return true
			}
			for len(s) > 0 {
				if globMatchImpl(pat[1:], s, nocase, skipLonger, nesting+1) {
					return true
				}
				if *skipLonger {
					return false
				}
				s = s[1:]
			}
			*skipLonger = true
			return false
		case '?':
			s = s[1:]
		case '[':
			pat = pat[1:]
			not := len(pat) > 0 && pat[0] == '^'
			if not {
				pat = pat[1:]
			}
			match := false
			for {
				if len(pat) >= 2 && pat[0] == '\\' {
					pat = pat[1:]
					if pat[0] == s[0] {
						match = true
					}
				} else if len(pat) > 0 && pat[0] == ']' {
					break
				} else if len(pat) == 0 {
					// Unterminated class: Redis steps back so that the
					// pattern ends right after this.
					pat = []byte{']'}
					break
				} else if len(pat) >= 3 && pat[1] == '-' {
					start, end, c := pat[0], pat[2], s[0]
					if start > end {
						start, end = end, start
					}
					if nocase {
						start, end, c = lower(start), lower(end), lower(c)
					}
					pat = pat[2:]
					if c >= start && c <= end {
						match = true
					}
				} else if nocase {
					if lower(pat[0]) == lower(s[0]) {
						match = true
					}
				} else if pat[0] == s[0] {
					match = true
				}
				pat = pat[1:]
			}
			if not {
				match = !match
			}
			if !match {
				return false
			}
			s = s[1:]
		case '\\':
			if len(pat) >= 2 {
				pat = pat[1:]
			}
			fallthrough
		default:
			if nocase {
				if lower(pat[0]) != lower(s[0]) {
					return false
				}
			} else if pat[0] != s[0] {
				return false
			}
			s = s[1:]
		}
		pat = pat[1:]
		if len(s) == 0 {
			for len(pat) > 0 && pat[0] == '*' {
				pat = pat[1:]
			}
			break
		}
	}
	return len(pat) == 0 && len(s) == 0
}

// GlobMatch reports whether s matches the Redis glob pattern pat (as KEYS
// and PSUBSCRIBE match).
func GlobMatch(pat, s []byte) bool { return globMatch(pat, s, false) }
