-- fixed_window: mirrors fixedWindow in pkg/limits/algorithm.go.
-- State: "window count", expiring at the end of the window.
local w = floordiv(now, t)
local wend = (w + 1) * t
local count = 0
local s = load('^(%S+) (%S+)$')
if s and s.err then
  return s
end
if s and s[1] == w then
  count = s[2]
end
local need = math.max(cost, 1)
local allowed, changed = false, false
if cost < 0 then
  count = math.max(0, count + cost)
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
local remaining = math.max(0, n - count)
local reset = 0
if not allowed and cost <= n then
  reset = wend - now
elseif count > 0 then
  reset = wend - now
end
if changed then
  if count > 0 then
    keep(num(w) .. ' ' .. num(count), wend - now)
  else
    redis.call('DEL', key)
  end
end
return {allowed and 1 or 0, remaining, reset}
