-- fixed_window mirrors fixedWindow in pkg/limits/algorithm.go, for the
-- joint script (a window hit on its own is decided with native commands:
-- window.go). State: window w's counter, under window_key(key, w), expiring
-- at the end of the window; a count_refused limit reads it as 2N at most.
local function fixed_window(key, n, t, b, cost, now, maxdelay, countrefused)
  local w = floordiv(now, t)
  local wend = (w + 1) * t
  local wkey = window_key(key, w)
  local count = load_count(wkey, countrefused and 2 * n)
  local need = max(cost, 1)
  local allowed, changed = false, false
  if cost < 0 then
    count = max(0, count + cost)
    allowed = true
    changed = true
  elseif cost > n then
    -- Can never fit: refused, key untouched.
  elseif count + need <= n then
    allowed = true
    if cost > 0 then
      count = count + cost
      changed = true
    end
  end
  if charged(countrefused, allowed, cost) then
    -- At most one period's worth of debt.
    count = min(count + cost, 2 * n)
    changed = true
  end
  local remaining = max(0, n - count)
  local retry, reset = 0, 0
  if count > 0 then
    reset = wend - now
  end
  if not allowed and cost <= n then
    retry = wend - now
  end
  local write
  if changed then
    if count > 0 then
      write = set_write(wkey, int(count), wend - now)
    else
      write = del_write(wkey)
    end
  end
  return allowed, remaining, retry, reset, 0, write
end
algorithms.fw = fixed_window
