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

// hostTicks reads the machine's CPU time so far from /proc/stat's "cpu"
// line: the ticks the hypervisor took from this VM for other guests
// (steal) and all ticks. A run's steal share says how far its numbers are
// this machine's: on a shared host it moves them by tens of percent.
func hostTicks() (steal, total int64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	return parseProcStat(b)
}

// parseProcStat reads the first line of /proc/stat, "cpu user nice system
// idle iowait irq softirq steal …": steal is the eighth number, total the
// sum of the first eight (guest time is already within user).
func parseProcStat(b []byte) (steal, total int64, err error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: no cpu line")
	}
	for i, s := range f[1:9] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %w", err)
		}
		total += n
		if i == 7 {
			steal = n
		}
	}
	return steal, total, nil
}
