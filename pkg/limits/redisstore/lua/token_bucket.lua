-- token_bucket mirrors tokenBucket in pkg/limits/algorithm.go, floating point
-- included (same operations in the same order).
-- State: the string "tokens stamp", tokens as %.17g so that the double
-- round-trips, expiring when the bucket is full again.

-- tb_refill is bucketRefill.
local function tb_refill(n, t, b, tk, elapsed)
  if elapsed <= 0 then
    return tk
  end
  return min(b, tk + elapsed * n / t)
end

-- tb_wait is bucketWait: the shortest wait until the bucket holds want
-- tokens: the closed form, then moved up or down to the shortest wait that
-- tb_refill itself agrees with.
local function tb_wait(n, t, b, tk, want)
  if tk >= want then
    return 0
  end
  local wt = ceil((want - tk) * t / n)
  while tb_refill(n, t, b, tk, wt) < want do
    wt = wt + 1
  end
  while wt > 0 and tb_refill(n, t, b, tk, wt - 1) >= want do
    wt = wt - 1
  end
  return wt
end

-- tb_wait_from is bucketWaitFrom: the shortest wait from now until a bucket
-- kept as tk at stamp holds want tokens.
local function tb_wait_from(n, t, b, tk, stamp, now, want)
  return max(0, tb_wait(n, t, b, tk, want) - (now - stamp))
end

local function token_bucket(key, n, t, b, cost, now, maxdelay, countrefused)
  local tokens = b
  local stokens, sstamp = load(key, '^(%S+) (%S+)$')
  if stokens then
    tokens = tb_refill(n, t, b, stokens, now - sstamp)
  end
  local need = max(cost, 1)
  local allowed, changed = false, false
  if cost < 0 then
    tokens = min(b, tokens - cost)
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
  if charged(countrefused, allowed, cost) then
    -- At most one period's worth (N tokens) of debt.
    tokens = max(tokens - cost, -n)
    changed = true
  end
  local remaining = max(0, floor(tokens))
  -- Waits are measured from the state that stays in Redis: the stored one on
  -- a refusal or a peek, the new one otherwise.
  local kept, stamp = b, now
  if changed then
    kept = tokens
  elseif stokens then
    kept, stamp = stokens, sstamp
  end
  local full = tb_wait_from(n, t, b, kept, stamp, now, b)
  local retry = 0
  if not allowed and cost <= b then
    retry = tb_wait_from(n, t, b, kept, stamp, now, need)
  end
  local write
  if changed then
    if full > 0 then
      write = set_write(key, num(tokens) .. ' ' .. int(now), full)
    else
      write = del_write(key)
    end
  end
  return allowed, remaining, retry, full, 0, write
end
algorithms.tb = token_bucket
