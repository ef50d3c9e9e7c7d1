package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// helpText describes a subcommand for its --help output.
type helpText struct {
	usage       string // synopsis lines, e.g. "kvorum start --data-dir DIR [flags]"
	description string
	groups      []flagGroup // flags listed by group, in this order
	footer      string
}

type flagGroup struct {
	title string
	names []string
}

// writeUsage prints a command's help: synopsis, description, and every flag
// with its meaning and default.
func writeUsage(w io.Writer, fs *flag.FlagSet, h helpText) {
	fmt.Fprintf(w, "Usage:\n%s\n", indent(strings.TrimSpace(h.usage), "  "))
	if h.description != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(h.description))
	}
	listed := map[string]bool{}
	groups := h.groups
	var rest []string
	fs.VisitAll(func(f *flag.Flag) {
		found := false
		for _, g := range groups {
			for _, n := range g.names {
				if n == f.Name {
					found = true
				}
			}
		}
		if !found {
			rest = append(rest, f.Name)
		}
	})
	if len(rest) > 0 {
		title := "Other flags"
		if len(groups) == 0 {
			title = "Flags"
		}
		groups = append(groups, flagGroup{title, rest})
	}
	for _, g := range groups {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		for _, name := range g.names {
			f := fs.Lookup(name)
			if f == nil || listed[name] {
				continue
			}
			listed[name] = true
			writeFlag(w, f)
		}
	}
	if h.footer != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(h.footer))
	}
}

func writeFlag(w io.Writer, f *flag.Flag) {
	argName, usage := flag.UnquoteUsage(f)
	line := "  --" + f.Name
	if argName != "" {
		line += " " + argName
	}
	def := f.DefValue
	switch {
	case strings.Contains(usage, "(required") || strings.Contains(usage, "(default"):
		def = ""
	case def == "":
		def = " (default: none)"
	default:
		def = " (default " + def + ")"
	}
	fmt.Fprintf(w, "%s\n%s%s\n", line, indent(usage, "        "), def)
}

func indent(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n")
}

// parseFlags parses args with fs. On -h/--help it prints the command's
// usage to stdout and returns errHelp; on a bad flag it returns a
// usageError naming it.
func parseFlags(cmd string, fs *flag.FlagSet, h helpText, args []string, stdout io.Writer) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			writeUsage(stdout, fs, h)
			return errHelp
		}
		return &usageError{cmd: cmd, msg: cleanFlagError(err)}
	}
	return nil
}

// cleanFlagError turns the flag package's messages into "--name" style.
func cleanFlagError(err error) string {
	msg := err.Error()
	for _, p := range []string{"flag provided but not defined: -", "flag needs an argument: -"} {
		if rest, ok := strings.CutPrefix(msg, p); ok {
			return strings.TrimSuffix(p, "-") + "--" + strings.TrimLeft(rest, "-")
		}
	}
	// `invalid value "x" for flag -name: reason`
	if i := strings.Index(msg, " for flag -"); i >= 0 {
		msg = msg[:i] + " for flag --" + msg[i+len(" for flag -"):]
	}
	return msg
}

// setFlags returns the names of the flags given on the command line.
func setFlags(fs *flag.FlagSet) map[string]bool {
	m := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { m[f.Name] = true })
	return m
}

// sizeValue is a flag holding a byte size: a plain number of bytes or a
// number with a K/KB/KiB, M/MB/MiB or G/GB/GiB suffix (powers of 1024).
type sizeValue struct{ p *int }

func (s sizeValue) String() string {
	if s.p == nil {
		return ""
	}
	return formatSize(*s.p)
}

func (s sizeValue) Set(v string) error {
	n, err := parseSize(v)
	if err != nil {
		return err
	}
	*s.p = n
	return nil
}

func parseSize(v string) (int, error) {
	s := strings.TrimSpace(v)
	mult := 1
	lower := strings.ToLower(s)
	for _, u := range []struct {
		suffixes []string
		mult     int
	}{
		{[]string{"gib", "gb", "g"}, 1 << 30},
		{[]string{"mib", "mb", "m"}, 1 << 20},
		{[]string{"kib", "kb", "k"}, 1 << 10},
		{[]string{"b"}, 1},
	} {
		found := false
		for _, suf := range u.suffixes {
			if strings.HasSuffix(lower, suf) {
				s = strings.TrimSpace(s[:len(s)-len(suf)])
				mult = u.mult
				found = true
				break
			}
		}
		if found {
			break
		}
	}
	n, err := strconv.ParseUint(s, 10, 63)
	if err != nil || s == "" {
		return 0, fmt.Errorf("not a size (want e.g. 1048576, 512KiB, 64MiB)")
	}
	if n > uint64(math.MaxInt)/uint64(mult) {
		return 0, fmt.Errorf("size too large")
	}
	return int(n) * mult, nil
}

func formatSize(n int) string {
	switch {
	case n == 0:
		return "0"
	case n%(1<<30) == 0:
		return strconv.Itoa(n>>30) + "GiB"
	case n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + "MiB"
	case n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + "KiB"
	default:
		return strconv.Itoa(n)
	}
}
