package limits

// slidingLog keeps one entry per allowed hit and counts the costs inside
// (now − T, now]: exact, with memory that grows with N (bounded by
// MaxLogRequests).
func slidingLog(l Limit, s State, cost, now, _ int64) Decision {
	n, t := l.Requests, l.PeriodMicros()
	// Count is the sum of the log's costs: the total inside the window is
	// that, less the entries at or before now − T, which have left it. Only
	// those are visited, so a decision costs what leaves the window, not
	// the length of the log.
	log, total, dead := s.Log, s.Count, s.logDead
	drop := 0
	for drop < len(log) && log[drop].At <= now-t {
		total -= log[drop].Cost
		drop++
	}
	log, dead = log[drop:], dead+drop
	need := max(cost, 1)
	d := Decision{}
	add := int64(0)
	switch {
	case cost < 0:
		log, total = refundLog(log, total, -cost)
		dead = 0
		d.Result.Allowed = true
		d.Changed = true
	case cost > n:
		// Can never fit.
	case total+need <= n:
		d.Result.Allowed = true
		add = cost
	}
	if charged(l, d.Result.Allowed, cost) {
		// At most one period's worth of debt.
		add = min(cost, 2*n-total)
	}
	if add > 0 {
		log, dead = appendLog(log, dead, now, add)
		total += add
		d.Changed = true
	}
	d.Result.Remaining = max(0, n-total)
	if len(log) > 0 {
		d.Result.ResetAfter = micros(log[len(log)-1].At + t - now)
	}
	if !d.Result.Allowed && cost <= n {
		// The oldest entries leave first: wait until enough of them have.
		if at := letsIn(log, total, need, n); at >= 0 {
			d.Result.RetryAfter = micros(at + t - now)
		}
	}
	if d.Changed {
		d.State = State{Live: len(log) > 0, Count: total, Log: log, logDead: dead}
		if len(log) > 0 {
			d.ExpireAt = log[len(log)-1].At + t
		}
	}
	return d
}

// letsIn is the instant of the entry of entries (oldest first, their costs
// summing to total) whose leaving, with those before it, lets a hit of
// need fit n; -1 if none needs to leave.
func letsIn(entries []LogEntry, total, need, n int64) int64 {
	at, freed := int64(-1), int64(0)
	for _, e := range entries {
		if total-freed+need <= n {
			break
		}
		freed += e.Cost
		at = e.At
	}
	return at
}

// refundLog gives back up to r units, newest entries first.
func refundLog(log []LogEntry, total, r int64) ([]LogEntry, int64) {
	out := append([]LogEntry(nil), log...)
	for len(out) > 0 && r > 0 {
		last := &out[len(out)-1]
		take := min(last.Cost, r)
		last.Cost -= take
		total -= take
		r -= take
		if last.Cost == 0 {
			out = out[:len(out)-1]
		}
	}
	return out, total
}

// appendLog appends an entry of cost add at now to log, whose array holds
// dead entries before it. It appends in place when there is room: the
// caller's state still reads as it was, since its entries end before the
// new one (see Decide on sharing). A clock may step back: it never appends
// before the newest entry, so that the log stays in order.
func appendLog(log []LogEntry, dead int, now, add int64) ([]LogEntry, int) {
	at := now
	if len(log) > 0 {
		at = max(at, log[len(log)-1].At)
	}
	if len(log) == cap(log) || dead+cap(log) > 4*len(log)+4 {
		// No room after the log, or an array four times larger than
		// what is live (dead entries before the log, room after it):
		// move to an array with room for as many again. Either comes
		// after at least half as many appends as the entries it
		// copies, so a decision costs O(1) on average, and the array
		// never holds more than four times the live entries.
		fresh := make([]LogEntry, len(log), 2*len(log)+1)
		copy(fresh, log)
		log, dead = fresh, 0
	}
	return append(log, LogEntry{At: at, Cost: add}), dead
}
