-- token_bucket: mirrors tokenBucket in pkg/limits/algorithm.go, floating
-- point included (same operations in the same order).
-- State: "tokens stamp", tokens as %.17g so that the double round-trips,
-- expiring when the bucket is full again.
local function refill(tk, elapsed)
  if elapsed <= 0 then
    return tk
  end
  return math.min(b, tk + elapsed * n / t)
end

-- wait is the shortest wait until the bucket holds want tokens: the closed
-- form, then moved up or down to the shortest wait that refill itself agrees
-- with.
local function wait(tk, want)
  if tk >= want then
    return 0
  end
  local wt = math.ceil((want - tk) * t / n)
  while refill(tk, wt) < want do
    wt = wt + 1
  end
  while wt > 0 and refill(tk, wt - 1) >= want do
    wt = wt - 1
  end
  return wt
end

-- wait_from is the shortest wait from now until a bucket kept as tk at
-- stamp holds want tokens.
local function wait_from(tk, stamp, want)
  return math.max(0, wait(tk, want) - (now - stamp))
end

local tokens = b
local s = load('^(%S+) (%S+)$')
if s and s.err then
  return s
end
if s then
  tokens = refill(s[1], now - s[2])
end
local need = math.max(cost, 1)
local allowed, changed = false, false
if cost < 0 then
  tokens = math.min(b, tokens - cost)
  allowed = true
  changed = true
elseif cost > b then
  -- Can never fit.
elseif tokens >= need then
  allowed = true
  if cost > 0 then
    tokens = tokens - cost
    changed = true
  end
end
local remaining = math.floor(tokens)
-- Waits are measured from the state that stays in Redis: the stored one on a
-- refusal or a peek, the new one otherwise.
local kept, stamp = b, now
if changed then
  kept = tokens
elseif s then
  kept, stamp = s[1], s[2]
end
local full = wait_from(kept, stamp, b)
local reset = full
if not allowed and cost <= b then
  reset = wait_from(kept, stamp, need)
end
if changed then
  if full > 0 then
    keep(num(tokens) .. ' ' .. num(now), full)
  else
    redis.call('DEL', key)
  end
end
return {allowed and 1 or 0, remaining, reset}
