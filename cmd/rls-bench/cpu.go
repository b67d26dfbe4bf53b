package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the unit of /proc/PID/stat's utime and stime: AT_CLKTCK
// from the auxiliary vector, 100 where that cannot be read.
var clockTicks = func() int64 {
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil || strconv.IntSize != 64 {
		return 100
	}
	for ; len(b) >= 16; b = b[16:] {
		tag, val := binary.NativeEndian.Uint64(b), binary.NativeEndian.Uint64(b[8:])
		if tag == 17 && val > 0 { // AT_CLKTCK
			return int64(val)
		}
	}
	return 100
}()

// processCPU is the user+system CPU time pid has used so far.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("-pids: %w", err)
	}
	return parseStat(b)
}

// parseStat reads utime and stime (fields 14 and 15) from a /proc/PID/stat
// line; the command name, field 2, is in parentheses and may hold spaces.
func parseStat(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("-pids: malformed stat line")
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3, state
	if len(f) < 13 {
		return 0, fmt.Errorf("-pids: short stat line")
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("-pids: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / time.Duration(clockTicks), nil
}

func sampleCPU(pids []int) ([]time.Duration, error) {
	out := make([]time.Duration, len(pids))
	for i, pid := range pids {
		d, err := processCPU(pid)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

// cpuTicks is one CPU line of /proc/stat, in ticks: the time spent busy
// (user, nice, system, irq, softirq), the time the hypervisor took from
// this VM for other guests (steal), and all of it.
type cpuTicks struct{ busy, steal, total int64 }

// hostTicks reads the machine's CPU time so far from /proc/stat: the "cpu"
// line first, then each CPU's. A run's steal share says how far its numbers
// are this machine's (on a shared host it moves them by tens of percent),
// and each CPU's busy share whether the run was bound by a CPU at all: a
// closed loop whose every CPU has time to spare is bound by the time its
// calls wait, not by what they cost.
func hostTicks() ([]cpuTicks, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return nil, err
	}
	return parseProcStat(b)
}

// parseProcStat reads the lines of /proc/stat that start with "cpu", "cpu
// user nice system idle iowait irq softirq steal …": steal is the eighth
// number, total the sum of the first eight (guest time is already within
// user).
func parseProcStat(b []byte) ([]cpuTicks, error) {
	var out []cpuTicks
	for line := range bytes.Lines(b) {
		f := strings.Fields(string(line))
		if len(f) == 0 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		if len(f) < 9 {
			return nil, fmt.Errorf("/proc/stat: short %s line", f[0])
		}
		var t cpuTicks
		for i, s := range f[1:9] {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("/proc/stat: %w", err)
			}
			t.total += n
			switch i {
			case 0, 1, 2, 5, 6:
				t.busy += n
			case 7:
				t.steal = n
			}
		}
		out = append(out, t)
	}
	if len(out) == 0 || !bytes.HasPrefix(b, []byte("cpu ")) {
		return nil, fmt.Errorf("/proc/stat: no cpu line")
	}
	return out, nil
}

// hostShares is what the machine did between two hostTicks readings: the
// steal share of all its CPU time, and each CPU's busy share (nil when
// the readings do not match).
func hostShares(t0, t1 []cpuTicks) (steal float64, busy []float64) {
	if len(t0) == 0 || len(t0) != len(t1) {
		return 0, nil
	}
	if d := t1[0].total - t0[0].total; d > 0 {
		steal = float64(t1[0].steal-t0[0].steal) / float64(d)
	}
	for i := 1; i < len(t1); i++ {
		b := 0.0
		if d := t1[i].total - t0[i].total; d > 0 {
			b = float64(t1[i].busy-t0[i].busy) / float64(d)
		}
		busy = append(busy, b)
	}
	return steal, busy
}
