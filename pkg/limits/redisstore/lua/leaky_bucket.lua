-- leaky_bucket mirrors leakyBucket in pkg/limits/algorithm.go, floating point
-- included (same operations in the same order).
-- State: the string "drain", the instant in microseconds (fractional, as
-- %.17g) at which the queue is empty again, expiring then (rounded up).

-- lb_fits is leakyFits: the request's last turn within the queue, its first
-- within the caller's deadline (maxdelay, 0: none).
local function lb_fits(wait, need, b, interval, maxdelay)
  if maxdelay > 0 and wait > maxdelay then
    return false
  end
  return wait + (need - 1) * interval <= b * interval
end

-- lb_wait is leakyWait: the shortest wait after which a request refused with
-- backlog fits: the closed form rounded up, then moved up or down until it is
-- the shortest wait for which lb_fits itself passes.
local function lb_wait(backlog, need, b, interval, maxdelay)
  local over = backlog + (need - 1) * interval - b * interval
  if maxdelay > 0 then
    over = max(over, backlog - maxdelay)
  end
  local wait = max(0, ceil(over))
  while not lb_fits(max(backlog - wait, 0), need, b, interval, maxdelay) do
    wait = wait + 1
  end
  while wait > 0 and lb_fits(max(backlog - (wait - 1), 0), need, b, interval, maxdelay) do
    wait = wait - 1
  end
  return wait
end

local function leaky_bucket(key, n, t, b, cost, now, maxdelay, countrefused)
  local interval = t / n
  local drain = now
  local sdrain = load(key, '^(%S+)$')
  if sdrain then
    drain = max(sdrain, now)
  end
  local wait = drain - now
  local need = max(cost, 1)
  local allowed, changed, delay = false, false, 0
  if cost < 0 then
    drain = max(drain + cost * interval, now)
    allowed = true
    changed = true
  elseif need - 1 > b then
    -- Can never fit: more turns than the queue holds.
  elseif lb_fits(wait, need, b, interval, maxdelay) then
    allowed = true
    if cost > 0 then
      -- A peek takes no turn, so it does not wait for one.
      delay = ceil(wait)
      drain = drain + cost * interval
      changed = true
    end
  end
  if charged(countrefused, allowed, cost) then
    -- At most one period's worth of debt beyond a full queue.
    drain = min(drain + cost * interval, now + b * interval + t)
    changed = true
  end
  local backlog = drain - now
  -- Free places in the queue: the request in service is not queued.
  local remaining = max(0, min(b, b + 1 - ceil(backlog / interval)))
  local retry, reset = 0, 0
  if backlog > interval then
    reset = ceil(backlog - interval)
  end
  if not allowed and need - 1 <= b then
    retry = lb_wait(backlog, need, b, interval, maxdelay)
  end
  local write
  if changed then
    if backlog > 0 then
      write = set_write(key, num(drain), ceil(drain) - now)
    else
      write = del_write(key)
    end
  end
  return allowed, remaining, retry, reset, delay, write
end
algorithms.lb = leaky_bucket
