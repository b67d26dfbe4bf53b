-- sliding_log mirrors slidingLog in pkg/limits/algorithm.go, for the joint
-- script (a hit on its own is decided with native commands: log.go). State:
-- a sorted set with one member per unit of cost the log counts, scored by
-- its hit's instant in microseconds; op is the hit's own prefix for the
-- members it adds (op .. j, unique per hit). The total inside the window is
-- a count; members that have left it are removed when the key is next
-- charged. A refund pops the newest members.

local function sliding_log(key, n, t, b, cost, now, maxdelay, countrefused, op)
  local cutoff = now - t
  local after = '(' .. int(cutoff)
  local total = call('ZCOUNT', key, after, '+inf')
  -- nth_newest is the instant of the k-th newest member inside the window
  -- (from 0), or nil.
  local function nth_newest(k)
    local z = call('ZRANGE', key, '+inf', after, 'BYSCORE', 'REV', 'LIMIT', k, 1, 'WITHSCORES')
    return z[2] and tonumber(z[2])
  end
  local need = max(cost, 1)
  local allowed, changed = false, false
  local add, popped = 0, 0
  if cost < 0 then
    -- refundLog: the newest first, never more than there are.
    popped = min(-cost, total)
    total = total - popped
    allowed = true
    changed = popped > 0
  elseif cost > n then
    -- Can never fit.
  elseif total + need <= n then
    allowed = true
    add = cost
  end
  if charged(countrefused, allowed, cost) then
    -- At most one period's worth of debt.
    add = min(cost, 2 * n - total)
  end
  if add > 0 then
    total = total + add
    changed = true
  end
  local remaining = max(0, n - total)
  local retry, reset = 0, 0
  local newest = nil
  if add > 0 then
    newest = now
  else
    newest = nth_newest(popped)
  end
  if newest then
    reset = newest + t - now
  end
  if not allowed and cost <= n then
    -- The oldest leave first: wait for the (n - need)-th newest of the log
    -- that stays, the charge just decided (the newest) included.
    local k = n - need
    local at = now
    if k >= add then
      at = nth_newest(k - add)
    end
    if at then
      retry = at + t - now
    end
  end
  local write
  if changed then
    write = function()
      if popped > 0 then
        call('ZPOPMAX', key, popped)
      end
      if add > 0 then
        call('ZREMRANGEBYSCORE', key, '-inf', cutoff)
        -- A thousand members per ZADD: unpack has a bound.
        for j0 = 0, add - 1, 1000 do
          local args = {}
          for j = j0 + 1, min(add, j0 + 1000) do
            args[#args + 1] = now
            args[#args + 1] = op .. j
          end
          call('ZADD', key, unpack(args))
        end
        call('PEXPIRE', key, max(1000, ttl_ms(t))) -- logTTL in log.go
      end
    end
  end
  return allowed, remaining, retry, reset, 0, write
end
algorithms.sl = sliding_log
