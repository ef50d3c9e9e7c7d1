package kvbench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// procCPU is a process's user+system CPU time so far, from
// /proc/PID/stat (fields 14 and 15).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may contain spaces:
	// count fields after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad utime/stime %q %q", pid, f[11], f[12])
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// procsCPU sums procCPU over pids; an unreadable process counts 0 and is
// reported in err (the others are still summed).
func procsCPU(pids []int) (total time.Duration, err error) {
	for _, p := range pids {
		d, e := procCPU(p)
		if e != nil && err == nil {
			err = e
		}
		total += d
	}
	return total, err
}

// procRSS is a process's resident set size in bytes (VmRSS in
// /proc/PID/status) and its anonymous part (RssAnon: the heap and the
// caches it allocated; the rest is file pages, mostly its own binary,
// shared with every process that maps the same file).
func procRSS(pid int) (rss, anon int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	rss, anon = -1, -1
	for _, l := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(l, ":")
		if !ok || (name != "VmRSS" && name != "RssAnon") {
			continue
		}
		f := strings.Fields(rest)
		kb, perr := int64(0), error(nil)
		if len(f) == 2 && f[1] == "kB" {
			kb, perr = strconv.ParseInt(f[0], 10, 64)
		}
		if len(f) != 2 || f[1] != "kB" || perr != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status: bad %s line %q", pid, name, l)
		}
		if name == "VmRSS" {
			rss = kb << 10
		} else {
			anon = kb << 10
		}
	}
	if rss < 0 || anon < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/status: no VmRSS or RssAnon (a kernel thread or a zombie?)", pid)
	}
	return rss, anon, nil
}

// selfCPU is this process's user+system CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
