// Package glob matches Redis glob patterns: the semantics of Redis 7's
// stringmatchlen (util.c), which KEYS, SCAN MATCH, HSCAN/SSCAN/ZSCAN
// MATCH, PSUBSCRIBE, PUBSUB CHANNELS and FUNCTION LIST LIBRARYNAME use.
//
// A pattern has * (any run of bytes), ? (one byte), [abc], [^a], [a-z]
// (a reversed range [z-a] is the same range) and \x (x itself). Matching
// is on bytes. Two details differ from a shell glob and are Redis's:
//
//   - "*" does not match the empty string: the matching loop needs a
//     non-empty subject (KEYS * and SCAN special-case the pattern "*").
//   - An unterminated class ("a[bc") ends at the end of the pattern.
//
// The package depends on nothing but the standard library.
package glob

// Match reports whether s matches the glob pattern pat; nocase folds
// ASCII letters.
func Match(pat, s []byte, nocase bool) bool {
	skipLonger := false
	return match(pat, s, nocase, &skipLonger, 0)
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// match is a port of stringmatchlen_impl. skipLonger is Redis's
// skipLongerMatches: once a '*' failed to match the rest of s at every
// position, no outer '*' can succeed by consuming more of s either, which
// keeps patterns like "*a*a*a*a*b" linear-ish instead of exponential.
func match(pat, s []byte, nocase bool, skipLonger *bool, nesting int) bool {
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
				if match(pat[1:], s, nocase, skipLonger, nesting+1) {
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
			matched := false
			for {
				if len(pat) >= 2 && pat[0] == '\\' {
					pat = pat[1:]
					if pat[0] == s[0] {
						matched = true
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
						matched = true
					}
				} else if nocase {
					if lower(pat[0]) == lower(s[0]) {
						matched = true
					}
				} else if pat[0] == s[0] {
					matched = true
				}
				pat = pat[1:]
			}
			if not {
				matched = !matched
			}
			if !matched {
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
