package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is set at build time:
//
//	go build -ldflags "-X main.version=1.2.3" ./cmd/kvorum
var version = "0.1.0-dev"

var versionHelp = helpText{
	usage:       "kvorum version",
	description: "Prints kvorum's version, the Go version it was built with and, when known, the\nsource commit.",
}

func newVersionFlags() *flag.FlagSet {
	return flag.NewFlagSet("version", flag.ContinueOnError)
}

// buildInfo is what `kvorum version` reports.
type buildInfo struct {
	Version   string
	GoVersion string
	Commit    string // vcs.revision, "" if unknown
	Time      string // vcs.time
	Modified  bool   // vcs.modified
	Platform  string
}

func readBuildInfo() buildInfo {
	bi := buildInfo{
		Version:   version,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		if info.GoVersion != "" {
			bi.GoVersion = info.GoVersion
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				bi.Commit = s.Value
			case "vcs.time":
				bi.Time = s.Value
			case "vcs.modified":
				bi.Modified = s.Value == "true"
			}
		}
	}
	return bi
}

// versionString is the one-line version used in logs.
func versionString() string {
	bi := readBuildInfo()
	s := bi.Version
	if bi.Commit != "" {
		s += " (" + shortCommit(bi.Commit)
		if bi.Modified {
			s += "-dirty"
		}
		s += ")"
	}
	return s
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

func writeVersion(w io.Writer, bi buildInfo) {
	fmt.Fprintf(w, "kvorum %s\n", bi.Version)
	fmt.Fprintf(w, "go:       %s\n", bi.GoVersion)
	if bi.Commit != "" {
		c := bi.Commit
		if bi.Modified {
			c += " (modified)"
		}
		if bi.Time != "" {
			c += " " + bi.Time
		}
		fmt.Fprintf(w, "commit:   %s\n", c)
	}
	fmt.Fprintf(w, "platform: %s\n", bi.Platform)
}

func runVersion(_ context.Context, args []string, stdout, _ io.Writer) error {
	fs := newVersionFlags()
	if err := parseFlags("version", fs, versionHelp, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("version", "unexpected argument %q", fs.Arg(0))
	}
	writeVersion(stdout, readBuildInfo())
	return nil
}
