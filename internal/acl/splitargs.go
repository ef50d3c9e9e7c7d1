package acl

// splitArgs is Redis's sdssplitargs on a C string (it stops at a NUL):
// arguments separated by blanks, "double quotes" with \xHH and \n \r \t
// \b \a escapes, 'single quotes' with \'. On unbalanced quotes (or a
// closing quote not followed by a blank) it returns nil, as Redis does,
// and a selector "(...)" of such text is then an empty one.
func splitArgs(line string) []string {
	line = cstr(line)
	var out []string
	p := 0
	at := func(i int) byte {
		if i < len(line) {
			return line[i]
		}
		return 0
	}
	isSpace := func(b byte) bool {
		return b == ' ' || b == '\t' || b == '\n' || b == '\v' || b == '\f' || b == '\r'
	}
	for {
		for at(p) != 0 && isSpace(at(p)) {
			p++
		}
		if at(p) == 0 {
			if out == nil {
				out = []string{}
			}
			return out
		}
		var cur []byte
		inq, insq, done := false, false, false
		for !done {
			c := at(p)
			switch {
			case inq:
				if c == '\\' && at(p+1) == 'x' && isHex(at(p+2)) && isHex(at(p+3)) {
					cur = append(cur, hexVal(at(p+2))*16+hexVal(at(p+3)))
					p += 3
				} else if c == '\\' && at(p+1) != 0 {
					p++
					e := at(p)
					switch e {
					case 'n':
						e = '\n'
					case 'r':
						e = '\r'
					case 't':
						e = '\t'
					case 'b':
						e = '\b'
					case 'a':
						e = '\a'
					}
					cur = append(cur, e)
				} else if c == '"' {
					if at(p+1) != 0 && !isSpace(at(p+1)) {
						return nil
					}
					done = true
				} else if c == 0 {
					return nil
				} else {
					cur = append(cur, c)
				}
			case insq:
				if c == '\\' && at(p+1) == '\'' {
					p++
					cur = append(cur, '\'')
				} else if c == '\'' {
					if at(p+1) != 0 && !isSpace(at(p+1)) {
						return nil
					}
					done = true
				} else if c == 0 {
					return nil
				} else {
					cur = append(cur, c)
				}
			default:
				switch c {
				case ' ', '\n', '\r', '\t', 0:
					done = true
				case '"':
					inq = true
				case '\'':
					insq = true
				default:
					cur = append(cur, c)
				}
			}
			if at(p) != 0 {
				p++
			}
		}
		out = append(out, string(cur))
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func hexVal(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
