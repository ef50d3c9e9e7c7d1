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
}

// Load reads a differential test file's commands, grouped in sequences,
// without their recorded replies (for tests that compare with a live
// redis-server instead).
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
		switch line {
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
			cur = append(cur, Cmd{Line: lineNo, Text: text, Args: args})
			if sep, _ := next(); sep != "----" {
				return nil, bad("one command per run block, then ----")
			}
		default:
			return nil, bad("unknown directive %q", line)
		}
		if err := skipExpected(next); err != nil {
			return nil, bad("%v", err)
		}
	}
	if len(cur) > 0 {
		seqs = append(seqs, cur)
	}
	return seqs, sc.Err()
}

// skipExpected skips the expected output after a "----" separator: up to
// a blank line, or, if it begins with a second "----", up to a "----"
// "----" pair (datadriven's form for outputs with blank lines).
func skipExpected(next func() (string, bool)) error {
	line, ok := next()
	if !ok || strings.TrimSpace(line) == "" {
		return nil
	}
	if line != "----" {
		for {
			line, ok = next()
			if !ok || strings.TrimSpace(line) == "" {
				return nil
			}
		}
	}
	for prev := ""; ; prev = line {
		if line, ok = next(); !ok {
			return fmt.Errorf("no closing ---- ----")
		}
		if prev == "----" && line == "----" {
			next() // the blank line after
			return nil
		}
	}
}
