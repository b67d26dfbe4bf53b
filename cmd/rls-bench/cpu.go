package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/procfs"
)

// processCPU is the user+system CPU time pid has used so far.
func processCPU(fs procfs.FS, pid int) (time.Duration, error) {
	p, err := fs.Proc(pid)
	if err != nil {
		return 0, fmt.Errorf("-pids: %w", err)
	}
	st, err := p.Stat()
	if err != nil {
		return 0, fmt.Errorf("-pids: %w", err)
	}
	return time.Duration(st.CPUTime() * float64(time.Second)), nil
}

func sampleCPU(pids []int) ([]time.Duration, error) {
	if len(pids) == 0 {
		return nil, nil
	}
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return nil, fmt.Errorf("-pids: %w", err)
	}
	out := make([]time.Duration, len(pids))
	for i, pid := range pids {
		if out[i], err = processCPU(fs, pid); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// cpuTicks is one CPU's time so far, in seconds: the time spent busy
// (user, nice, system, irq, softirq), the time the hypervisor took from
// this VM for other guests (steal), and all of it.
type cpuTicks struct{ busy, steal, total float64 }

// hostTicks reads the machine's CPU time so far from /proc/stat: all CPUs
// first, then each CPU's, in the order of their numbers. A run's steal
// share says how far its numbers are this machine's (on a shared host it
// moves them by tens of percent), and each CPU's busy share whether the
// run was bound by a CPU at all: a closed loop whose every CPU has time to
// spare is bound by the time its calls wait, not by what they cost.
func hostTicks() ([]cpuTicks, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return nil, err
	}
	st, err := fs.Stat()
	if err != nil {
		return nil, err
	}
	return hostCPUs(st), nil
}

// hostCPUs is st's CPU lines as cpuTicks: the total first, then each CPU.
// total is the sum of the first eight numbers of a line (user to steal;
// guest time is already within user).
func hostCPUs(st procfs.Stat) []cpuTicks {
	ticks := func(c procfs.CPUStat) cpuTicks {
		return cpuTicks{
			busy:  c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ,
			steal: c.Steal,
			total: c.User + c.Nice + c.System + c.Idle + c.Iowait + c.IRQ + c.SoftIRQ + c.Steal,
		}
	}
	out := []cpuTicks{ticks(st.CPUTotal)}
	ids := make([]int64, 0, len(st.CPU))
	for id := range st.CPU {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		out = append(out, ticks(st.CPU[id]))
	}
	return out
}

// hostShares is what the machine did between two hostTicks readings: the
// steal share of all its CPU time, and each CPU's busy share (nil when
// the readings do not match).
func hostShares(t0, t1 []cpuTicks) (steal float64, busy []float64) {
	if len(t0) == 0 || len(t0) != len(t1) {
		return 0, nil
	}
	if d := t1[0].total - t0[0].total; d > 0 {
		steal = (t1[0].steal - t0[0].steal) / d
	}
	for i := 1; i < len(t1); i++ {
		b := 0.0
		if d := t1[i].total - t0[i].total; d > 0 {
			b = (t1[i].busy - t0[i].busy) / d
		}
		busy = append(busy, b)
	}
	return steal, busy
}
