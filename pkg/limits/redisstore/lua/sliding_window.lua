-- sliding_window mirrors slidingWindow in pkg/limits/algorithm.go, floating
-- point included (same operations in the same order), for the joint script
-- (a window hit on its own is decided with native commands: window.go).
-- State: a counter per window, under window_key(key, w), each expiring at
-- the end of the window after its own; a count_refused limit reads them as
-- 2N at most.

-- sw_weight is slidingWeight: the previous window's share at elapsed el.
local function sw_weight(t, pv, el)
  return pv * (t - el) / t
end

local function sw_fits(n, t, pv, cu, el, nd)
  return sw_weight(t, pv, el) + cu + nd <= n
end

-- sw_wait is slidingWait: the shortest wait after which a hit of cost nd
-- (<= n) fits, checked with sw_fits itself.
local function sw_wait(n, t, pv, cu, el, nd)
  -- Within the current window, the previous window's weight decays.
  local room = n - nd - cu
  if room >= 0 and pv > 0 then
    local wt = (t - el) - floor(room * t / pv)
    wt = max(wt, 0)
    while wt < t - el and not sw_fits(n, t, pv, cu, el + wt, nd) do
      wt = wt + 1
    end
    if wt < t - el then
      return wt
    end
  end
  -- In the next window the current count becomes the previous one; its
  -- first instant is checked with sw_fits too (cu*t/t can round above cu).
  if cu + nd <= n and sw_fits(n, t, cu, 0, 0, nd) then
    return t - el
  end
  local e2 = t - floor((n - nd) * t / cu)
  e2 = max(e2, 0)
  while e2 < t and not sw_fits(n, t, cu, 0, e2, nd) do
    e2 = e2 + 1
  end
  return t - el + e2
end

local function sliding_window(key, n, t, b, cost, now, maxdelay, countrefused)
  local w = floordiv(now, t)
  local e = now - w * t
  local cap = countrefused and 2 * n
  local curkey = window_key(key, w)
  local cur, prev = load_count(curkey, cap), load_count(window_key(key, w - 1), cap)
  local need = max(cost, 1)
  local allowed, changed = false, false
  if cost < 0 then
    cur = max(0, cur + cost)
    allowed = true
    changed = true
  elseif cost > n then
    -- Can never fit.
  elseif sw_fits(n, t, prev, cur, e, need) then
    allowed = true
    if cost > 0 then
      cur = cur + cost
      changed = true
    end
  end
  if charged(countrefused, allowed, cost) then
    -- At most one period's worth of debt.
    cur = min(cur + cost, 2 * n)
    changed = true
  end
  local est = sw_weight(t, prev, e) + cur
  local remaining = max(0, floor(n - est))
  -- Waits count from the state that stays, a count_refused charge included.
  local retry, reset = 0, 0
  if cur > 0 then
    reset = 2 * t - e
  elseif prev > 0 then
    reset = t - e
  end
  if not allowed and cost <= n then
    retry = sw_wait(n, t, prev, cur, e, need)
  end
  local write
  if changed then
    -- The previous window's counter stays as it is, until its own expiry.
    if cur > 0 then
      write = set_write(curkey, int(cur), (w + 2) * t - now)
    else
      write = del_write(curkey)
    end
  end
  return allowed, remaining, retry, reset, 0, write
end
algorithms.sw = sliding_window
