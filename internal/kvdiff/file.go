package kvdiff

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// The differential test files (testdata/diff/*.txt, described in
// internal/kv/testdata/diff/README.md) are datadriven files with two
// directives:
//
//	sequence
//	----
//
//	run
//	SET k "a b"
//	----
//	OK
//
// "sequence" starts a new sequence of commands (both sides get FLUSHALL);
// "run" holds one command in its input, quoted as SplitArgs reads it, and
// redis-server's reply below the separator, as Expected renders it.
const (
	DirectiveSequence = "sequence"
	DirectiveRun      = "run"
)

// Cmd is one command of a sequence.
type Cmd struct {
	Line int    // the command's line in the file
	Text string // the command as written
	Args []string
	// Expected is the recorded reply, as Expected rendered it (ending in
	// a newline); ExpectedFor picks one protocol version's form.
	Expected string
}

// Load reads a differential test file's commands, grouped in sequences,
// with their recorded replies, for tests that run the files outside
// datadriven (through a cluster, say). It never rewrites the file.
func Load(file string) ([][]Cmd, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var seqs [][]Cmd
	var cur []Cmd
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	lineNo := 0
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		lineNo++
		return sc.Text(), true
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%s:%d: %s", file, lineNo, fmt.Sprintf(format, a...))
	}
	for {
		line, ok := next()
		if !ok {
			break
		}
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		switch fields[0] {
		case DirectiveSequence:
			if len(cur) > 0 {
				seqs = append(seqs, cur)
				cur = nil
			}
			if sep, _ := next(); sep != "----" {
				return nil, bad("sequence takes no input: ---- expected")
			}
		case DirectiveRun:
			text, ok := next()
			text = strings.TrimSpace(text)
			if !ok || text == "----" || text == "" {
				return nil, bad("run without a command")
			}
			args, err := SplitArgs(text)
			if err != nil || len(args) == 0 {
				return nil, bad("bad command %q: %v", text, err)
			}
			if len(fields) > 1 {
				return nil, bad("unknown argument %s", fields[1])
			}
			cmd := Cmd{Line: lineNo, Text: text, Args: args}
			if sep, _ := next(); sep != "----" {
				return nil, bad("one command per run block, then ----")
			}
			if cmd.Expected, err = readExpected(next); err != nil {
				return nil, bad("%v", err)
			}
			cur = append(cur, cmd)
			continue
		default:
			return nil, bad("unknown directive %q", line)
		}
		if _, err := readExpected(next); err != nil {
			return nil, bad("%v", err)
		}
	}
	if len(cur) > 0 {
		seqs = append(seqs, cur)
	}
	return seqs, sc.Err()
}

// readExpected reads the expected output after a "----" separator: up to
// a blank line, or, if it begins with a second "----", up to a "----"
// "----" pair (datadriven's form for outputs with blank lines).
func readExpected(next func() (string, bool)) (string, error) {
	var b strings.Builder
	line, ok := next()
	if !ok || strings.TrimSpace(line) == "" {
		return "", nil
	}
	if line != "----" {
		for ok && strings.TrimSpace(line) != "" {
			b.WriteString(line + "\n")
			line, ok = next()
		}
		return b.String(), nil
	}
	var lines []string
	for {
		if line, ok = next(); !ok {
			return "", fmt.Errorf("no closing ---- ----")
		}
		if n := len(lines); n > 0 && lines[n-1] == "----" && line == "----" {
			next() // the blank line after
			for _, l := range lines[:n-1] {
				b.WriteString(l + "\n")
			}
			return b.String(), nil
		}
		lines = append(lines, line)
	}
}

// ExpectedFor is the part of a recorded reply (Expected's text) that
// protocol version proto gives, ending in a newline.
func ExpectedFor(recorded string, proto int) string {
	if !strings.HasPrefix(recorded, "RESP2:") {
		return recorded
	}
	i := strings.Index(recorded, "\nRESP3:")
	if i < 0 {
		return recorded
	}
	part := recorded[i+1:]
	if proto < 3 {
		part = recorded[:i+1]
	}
	part = part[len("RESP2:"):]
	return strings.TrimPrefix(strings.TrimPrefix(part, " "), "\n")
}
