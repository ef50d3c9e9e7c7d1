//go:build !linux

package diskfloor

import "os"

func fdatasync(f *os.File) error { return f.Sync() }
