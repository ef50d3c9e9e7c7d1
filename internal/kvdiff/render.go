package kvdiff

import (
	"sort"
	"strconv"
	"strings"
)

// Render writes v as text in the style of redis-cli, but exactly: every
// RESP type has its own form and bytes outside printable ASCII are escaped,
// so two replies render alike only if they are alike on the wire.
//
//	"abc"               bulk string (\" \\ \n \r \t, other bytes \xHH)
//	OK                  status; "(status) ..." unless it starts with a
//	                    letter and is printable ASCII without a backslash
//	(error) ERR ...     error; "(blob error) ..." for RESP3's blob errors
//	(integer) 3         integer
//	(nil)               RESP2 null bulk, RESP3 null
//	(nil array)         RESP2 null array
//	(double) 1.5        RESP3 double, as sent
//	(true), (false)     RESP3 booleans
//	(big number) 12     RESP3 big number
//	(verbatim txt) "x"  RESP3 verbatim string
//	1) "a"              array elements, nested ones indented under their parent
//	1~ "a"              RESP3 set elements
//	1# "k" => "v"       RESP3 map entries
//	1> "message"        RESP3 push elements
//	(empty array)       and (empty set), (empty map), (empty push)
func Render(v Value) string { return strings.Join(renderLines(v), "\n") }

func renderLines(v Value) []string {
	switch v.Type {
	case '$':
		if v.Null {
			return []string{"(nil)"}
		}
		return []string{quote(v.Str)}
	case '+':
		if bareStatus(v.Str) {
			return []string{string(v.Str)}
		}
		return []string{"(status) " + escape(v.Str)}
	case '-':
		return []string{"(error) " + escape(v.Str)}
	case '!':
		return []string{"(blob error) " + escape(v.Str)}
	case ':':
		return []string{"(integer) " + strconv.FormatInt(v.Int, 10)}
	case '_':
		return []string{"(nil)"}
	case ',':
		return []string{"(double) " + escape(v.Str)}
	case '#':
		if v.Int != 0 {
			return []string{"(true)"}
		}
		return []string{"(false)"}
	case '(':
		return []string{"(big number) " + escape(v.Str)}
	case '=':
		format, text := "", v.Str
		if len(text) >= 4 && text[3] == ':' {
			format, text = string(text[:3]), text[4:]
		}
		return []string{"(verbatim " + escape([]byte(format)) + ") " + quote(text)}
	case '*':
		if v.Null {
			return []string{"(nil array)"}
		}
		return renderList(v.Elems, ")", "(empty array)")
	case '~':
		return renderList(v.Elems, "~", "(empty set)")
	case '>':
		return renderList(v.Elems, ">", "(empty push)")
	case '%':
		if len(v.Elems) == 0 {
			return []string{"(empty map)"}
		}
		var out []string
		for i := 0; i+1 < len(v.Elems); i += 2 {
			prefix := strconv.Itoa(i/2+1) + "# "
			key := renderLines(v.Elems[i])
			val := renderLines(v.Elems[i+1])
			// The key's lines under the prefix, then the value after the
			// key's last line, its own lines aligned under its first.
			for j, l := range key[:len(key)-1] {
				out = append(out, indent(prefix, j)+l)
			}
			last := indent(prefix, len(key)-1) + key[len(key)-1] + " => "
			out = append(out, last+val[0])
			for _, l := range val[1:] {
				out = append(out, strings.Repeat(" ", len(last))+l)
			}
		}
		return out
	}
	return []string{"(unknown reply type " + strconv.Quote(string(v.Type)) + ")"}
}

// renderList renders elements one per line, numbered with the given mark.
func renderList(elems []Value, mark, empty string) []string {
	if len(elems) == 0 {
		return []string{empty}
	}
	var out []string
	for i, e := range elems {
		prefix := strconv.Itoa(i+1) + mark + " "
		for j, l := range renderLines(e) {
			out = append(out, indent(prefix, j)+l)
		}
	}
	return out
}

// indent is prefix on an item's first line and as many spaces on the others.
func indent(prefix string, line int) string {
	if line == 0 {
		return prefix
	}
	return strings.Repeat(" ", len(prefix))
}

func bareStatus(s []byte) bool {
	if len(s) == 0 || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		return false
	}
	for _, c := range s {
		if c < 0x20 || c > 0x7e || c == '\\' {
			return false
		}
	}
	return true
}

// quote is s in double quotes with escape's escapes and \" for quotes.
func quote(s []byte) string {
	var b strings.Builder
	b.WriteByte('"')
	appendEscaped(&b, s, true)
	b.WriteByte('"')
	return b.String()
}

// escape is s with backslashes doubled, \n \r \t, and \xHH for every other
// byte outside printable ASCII.
func escape(s []byte) string {
	var b strings.Builder
	appendEscaped(&b, s, false)
	return b.String()
}

func appendEscaped(b *strings.Builder, s []byte, quoted bool) {
	const hex = "0123456789abcdef"
	for _, c := range s {
		switch {
		case c == '\\':
			b.WriteString(`\\`)
		case c == '"' && quoted:
			b.WriteString(`\"`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20 || c > 0x7e:
			b.WriteString(`\x`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		default:
			b.WriteByte(c)
		}
	}
}

// Canonical puts the parts of cmd's reply whose order Redis leaves
// unspecified into a fixed order, as SortUnordered does for go-redis
// values: the elements of KEYS, SMEMBERS, SINTER, SUNION, SDIFF, HKEYS,
// HVALS and SPOP replies, the field/value pairs of HGETALL (a flat array
// in RESP2, a map in RESP3), and the keys of a SCAN or SSCAN page and the
// pairs of an HSCAN page. Redis returns small collections in insertion
// order and kvorum in byte order; both are allowed. v is not modified.
func Canonical(cmd string, v Value) Value {
	byElem := func(v Value) Value {
		if v.Null || (v.Type != '*' && v.Type != '~') {
			return v
		}
		v.Elems = sortedGroups(v.Elems, 1)
		return v
	}
	byPair := func(v Value) Value {
		if v.Null || (v.Type != '*' && v.Type != '%') || len(v.Elems)%2 != 0 {
			return v
		}
		v.Elems = sortedGroups(v.Elems, 2)
		return v
	}
	page := func(v Value, f func(Value) Value) Value {
		if v.Type == '*' && len(v.Elems) == 2 {
			v.Elems = []Value{v.Elems[0], f(v.Elems[1])}
		}
		return v
	}
	switch strings.ToUpper(cmd) {
	case "KEYS", "SMEMBERS", "SINTER", "SUNION", "SDIFF", "HKEYS", "HVALS", "SPOP":
		return byElem(v)
	case "HGETALL":
		return byPair(v)
	case "SCAN", "SSCAN":
		return page(v, byElem)
	case "HSCAN":
		return page(v, byPair)
	}
	return v
}

// sortedGroups returns a copy of elems, taken as groups of n, sorted by
// the rendering of each group's first element (stable).
func sortedGroups(elems []Value, n int) []Value {
	type group struct {
		key   string
		elems []Value
	}
	groups := make([]group, len(elems)/n)
	for i := range groups {
		g := elems[i*n : i*n+n]
		groups[i] = group{Render(g[0]), g}
	}
	sort.SliceStable(groups, func(i, j int) bool { return groups[i].key < groups[j].key })
	out := make([]Value, 0, len(elems))
	for _, g := range groups {
		out = append(out, g.elems...)
	}
	return out
}

// Expected is the text a differential test file records for one command:
// the rendering of its reply in RESP2 and in RESP3, once if they are the
// same, else each under its label:
//
//	RESP2: "1.5"
//	RESP3: (double) 1.5
//
// or, for replies of several lines, the label alone on a line above them.
// Unordered parts of the reply are put in order first (Canonical).
func Expected(cmd string, resp2, resp3 Value) string {
	a, b := Render(Canonical(cmd, resp2)), Render(Canonical(cmd, resp3))
	if a == b {
		return a + "\n"
	}
	return labelled("RESP2", a) + labelled("RESP3", b)
}

func labelled(label, s string) string {
	if strings.Contains(s, "\n") {
		return label + ":\n" + s + "\n"
	}
	return label + ": " + s + "\n"
}
