-- sliding_log mirrors slidingLog in pkg/limits/algorithm.go.
-- State: a sorted set with one entry per allowed hit (Go's State.Log): the
-- score is the hit's instant in microseconds, the member is
-- sl_member(start, cost), where start is the sum of the costs of the entries
-- before it since the key was created. Entries are contiguous (each starts
-- where the previous one ends; refunds shrink the newest, trimming removes the
-- oldest), so the total inside the window is end(newest) - start(oldest in
-- the window), read from two entries whatever the size of the set, and start
-- makes every member unique. The key expires with its newest entry.

-- sl_member encodes an entry: start in decimal behind a letter that gives its
-- length ('a' for one digit), so that entries of the same instant sort by
-- start, as they do in Go's log, then ':' and the cost.
local function sl_member(start, cost)
  local s = int(start)
  return string.char(96 + #s) .. s .. ':' .. int(cost)
end

-- sl_entry decodes a member into start and cost.
local function sl_entry(key, m)
  local s, c = match(m, '^%l(%d+):(%d+)$')
  if not s then
    malformed(key)
  end
  return tonumber(s), tonumber(c)
end

-- sl_walk iterates over the entries inside the window (after cutoff), oldest
-- first, or newest first when rev is set, as member, instant, start, cost.
-- It reads pages with ZRANGE ... LIMIT, the first of at most hint entries
-- (what the walk can need), then doubling, so that a walk reads about the
-- entries it visits, never the whole set.
local function sl_walk(key, cutoff, rev, hint)
  local page, i, off, size, last = {}, 1, 0, max(1, min(hint, 64)), false
  return function()
    if i > #page then
      if last then
        return nil
      end
      if rev then
        page = call('ZRANGE', key, '+inf', '(' .. int(cutoff), 'BYSCORE', 'REV',
          'LIMIT', off, size, 'WITHSCORES')
      else
        page = call('ZRANGE', key, '(' .. int(cutoff), '+inf', 'BYSCORE',
          'LIMIT', off, size, 'WITHSCORES')
      end
      last = #page < 2 * size
      off = off + size
      size = 2 * size
      i = 1
      if #page == 0 then
        return nil
      end
    end
    local m, at = page[i], tonumber(page[i + 1])
    i = i + 2
    local start, c = sl_entry(key, m)
    return m, at, start, c
  end
end

local function sliding_log(key, n, t, b, cost, now, maxdelay, countrefused)
  local cutoff = now - t
  -- Entries at or before now - T have left the window: they are left out
  -- here, and removed by the write, if any.
  local total, top_end, top_at, newest_at = 0, 0, nil, nil
  local top = call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if #top > 0 then
    local start, c = sl_entry(key, top[1])
    top_end, top_at = start + c, tonumber(top[2])
    if top_at > cutoff then
      local first = call('ZRANGE', key, '(' .. int(cutoff), '+inf', 'BYSCORE', 'LIMIT', 0, 1)
      total = top_end - sl_entry(key, first[1])
      newest_at = top_at
    end
  end
  local need = max(cost, 1)
  local allowed, changed = false, false
  local add, at = 0, now
  -- A refund's plan: how many of the newest entries go, and the entry it
  -- shrinks {member, instant, start, new cost}.
  local removed, shrunk = 0, nil
  if cost < 0 then
    -- refundLog: newest entries first.
    local r = -cost
    local walk = sl_walk(key, cutoff, true, r + 1)
    newest_at = nil
    while true do
      local m, eat, start, c = walk()
      if not m then
        break
      end
      if r == 0 then
        newest_at = eat -- the newest entry that stays
        break
      end
      local take = min(c, r)
      r = r - take
      total = total - take
      if take == c then
        removed = removed + 1
      else
        shrunk = {m, eat, start, c - take}
        newest_at = eat
        break
      end
    end
    allowed = true
    changed = true
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
    -- A clock may step back: never append before the newest entry, so
    -- that the log stays in order (as the Go code does).
    if top_at and top_at > now then
      at = top_at
    end
    total = total + add
    newest_at = at
    changed = true
  end
  local remaining = max(0, n - total)
  local retry, reset = 0, 0
  if newest_at then
    reset = newest_at + t - now
  end
  if not allowed and cost <= n then
    -- The oldest entries leave first: wait until enough of them have. The
    -- charge just decided, not stored yet, is the newest entry.
    local target = total + need - n
    local freed = 0
    local walk = sl_walk(key, cutoff, false, target)
    while freed < target do
      local m, eat, start, c = walk()
      if not m then
        break
      end
      freed = freed + c
      retry = eat + t - now
    end
    if freed < target and add > 0 then
      retry = at + t - now
    end
  end
  local write
  if changed then
    write = function()
      call('ZREMRANGEBYSCORE', key, '-inf', cutoff)
      if removed > 0 then
        call('ZREMRANGEBYRANK', key, -removed, -1)
      end
      if shrunk then
        call('ZREM', key, shrunk[1])
        call('ZADD', key, shrunk[2], sl_member(shrunk[3], shrunk[4]))
      end
      if add > 0 then
        call('ZADD', key, at, sl_member(top_end, add))
      end
      if newest_at then
        call('PEXPIRE', key, ttl_ms(newest_at + t - now))
      else
        call('DEL', key)
      end
    end
  end
  return allowed, remaining, retry, reset, 0, write
end
algorithms.sl = sliding_log
