package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuSnap is CPU time used so far by this process (the client side: every
// library under test runs here) and by the redis-server processes.
type cpuSnap struct {
	client, server time.Duration
}

func (a cpuSnap) sub(b cpuSnap) cpuSnap {
	return cpuSnap{client: a.client - b.client, server: a.server - b.server}
}

// serverPids is set once the servers run; sampleCPU reads their
// /proc/<pid>/stat.
var serverPids []int

// clockTick is USER_HZ, 100 on every Linux this runs on.
const clockTick = 10 * time.Millisecond

func sampleCPU() cpuSnap {
	var s cpuSnap
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.client = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	for _, pid := range serverPids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		// Fields after the command name, which ends at the last ')':
		// state is field 3, utime 14, stime 15.
		str := string(b)
		i := strings.LastIndexByte(str, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(str[i+1:])
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		s.server += time.Duration(u+st) * clockTick
	}
	return s
}
