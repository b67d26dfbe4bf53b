-- fixed_window mirrors fixedWindow in pkg/limits/algorithm.go.
-- State: the string "window count", expiring at the end of the window.
local function fixed_window(key, n, t, b, cost, now, maxdelay, countrefused)
  local w = floordiv(now, t)
  local wend = (w + 1) * t
  local count = 0
  local sw, scount = load(key, '^(%S+) (%S+)$')
  if sw == w then
    count = scount
  end
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
      write = set_write(key, int(w) .. ' ' .. int(count), wend - now)
    else
      write = del_write(key)
    end
  end
  return allowed, remaining, retry, reset, 0, write
end
algorithms.fw = fixed_window
