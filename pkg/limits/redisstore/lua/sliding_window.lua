-- sliding_window: mirrors slidingWindow in pkg/limits/algorithm.go, floating
-- point included (same operations in the same order).
-- State: "window count prev", expiring when both counters stop mattering.
local w = floordiv(now, t)
local e = now - w * t
local cur, prev = 0, 0
local s = load('^(%S+) (%S+) (%S+)$')
if s and s.err then
  return s
end
if s then
  if s[1] == w then
    cur, prev = s[2], s[3]
  elseif s[1] == w - 1 then
    prev = s[2]
  end
end

local function weight(pv, el)
  return pv * (t - el) / t
end

local function fits(pv, cu, el, nd)
  return weight(pv, el) + cu + nd <= n
end

local function wait(pv, cu, el, nd)
  local room = n - nd - cu
  if room >= 0 and pv > 0 then
    local wt = (t - el) - math.floor(room * t / pv)
    wt = math.max(wt, 0)
    while wt < t - el and not fits(pv, cu, el + wt, nd) do
      wt = wt + 1
    end
    if wt < t - el then
      return wt
    end
  end
  -- In the next window the current count becomes the previous one; its
  -- first instant is checked with fits too (cu*t/t can round above cu).
  if cu + nd <= n and fits(cu, 0, 0, nd) then
    return t - el
  end
  local e2 = t - math.floor((n - nd) * t / cu)
  e2 = math.max(e2, 0)
  while e2 < t and not fits(cu, 0, e2, nd) do
    e2 = e2 + 1
  end
  return t - el + e2
end

local need = math.max(cost, 1)
local allowed, changed = false, false
if cost < 0 then
  cur = math.max(0, cur + cost)
  allowed = true
  changed = true
elseif cost > n then
  -- Can never fit.
elseif fits(prev, cur, e, need) then
  allowed = true
  if cost > 0 then
    cur = cur + cost
    changed = true
  end
end
local est = weight(prev, e) + cur
local remaining = math.max(0, math.floor(n - est))
local reset = 0
if not allowed and cost <= n then
  reset = wait(prev, cur, e, need)
elseif cur > 0 then
  reset = 2 * t - e
elseif prev > 0 then
  reset = t - e
end
if changed then
  local v = num(w) .. ' ' .. num(cur) .. ' ' .. num(prev)
  if cur > 0 then
    keep(v, (w + 2) * t - now)
  elseif prev > 0 then
    keep(v, (w + 1) * t - now)
  else
    redis.call('DEL', key)
  end
end
return {allowed and 1 or 0, remaining, reset}
