package kv

// globMatch implements Redis's stringmatchlen: * ? [abc] [^a] [a-z] and \x.
func globMatch(pat, s []byte, nocase bool) bool {
	return globMatchDepth(pat, s, nocase, 0)
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func globMatchDepth(pat, s []byte, nocase bool, depth int) bool {
	if depth > 1000 {
		return false
	}
	for len(pat) > 0 && len(s) >= 0 {
		switch pat[0] {
		case '*':
			for len(pat) > 1 && pat[1] == '*' {
				pat = pat[1:]
			}
			if len(pat) == 1 {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if globMatchDepth(pat[1:], s[i:], nocase, depth+1) {
					return true
				}
			}
			return false
		case '?':
			if len(s) == 0 {
				return false
			}
			s = s[1:]
		case '[':
			if len(s) == 0 {
				return false
			}
			pat = pat[1:]
			not := len(pat) > 0 && pat[0] == '^'
			if not {
				pat = pat[1:]
			}
			match := false
			for {
				if len(pat) == 0 {
					break
				}
				if pat[0] == '\\' && len(pat) >= 2 {
					pat = pat[1:]
					if pat[0] == s[0] {
						match = true
					}
				} else if pat[0] == ']' {
					break
				} else if len(pat) >= 3 && pat[1] == '-' {
					start, end := pat[0], pat[2]
					c := s[0]
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
			if len(pat) == 0 {
				// Unterminated class: Redis treats the end of pattern as ']'.
				pat = []byte{']'}
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
			if len(s) == 0 {
				return false
			}
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
