-- The tail of the batch script: many runs, each as single.lua would decide
-- it, in one call, so that Redis pays for one script call, not one per run.
-- Only for a single Redis: the keys of a batch need not share a slot.
--
-- KEYS = the keys of every run, in order. ARGV = the number of distinct
-- limits, five fields per limit (algorithm, N, T in microseconds, B,
-- count_refused: 1 or 0), then for each run: now in microseconds (empty:
-- the server's TIME, read once per call), the number of hits, then three
-- fields per hit: its limit's index (from 1), cost, the longest delay in
-- microseconds. A limit's fields come once per call, not once per hit:
-- fewer arguments for Redis to parse, and numbers converted once.
--
-- Returns one element per run: its five integers per hit, or an error
-- reply. A run that fails leaves the others decided, as separate scripts
-- would.
local nlimits = tonumber(ARGV[1])
if not nlimits or nlimits < 1 or 1 + 5 * nlimits > #ARGV then
  return redis.error_reply('envoy-rls: malformed batch: ' .. tostring(ARGV[1]) .. ' limits for ' .. #ARGV .. ' arguments')
end
-- limits_of[i] is the i-th limit: its algorithm's function (nil for one this
-- script lacks, an error for the runs that use it), N, T, B, count_refused,
-- the algorithm's name.
local limits_of = {}
for i = 1, nlimits do
  local a = 1 + 5 * (i - 1)
  limits_of[i] = {algorithms[ARGV[a + 1]], tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]),
    tonumber(ARGV[a + 4]), ARGV[a + 5] == '1', ARGV[a + 1]}
end

-- limit_hit reads the i-th hit of a run whose three fields per hit follow
-- ARGV[a0], as decide_run reads a hit.
local function limit_hit(a0, i)
  local a = a0 + 3 * (i - 1)
  local l = limits_of[tonumber(ARGV[a + 1])]
  if not l then
    error({err = 'envoy-rls: malformed batch: no limit ' .. tostring(ARGV[a + 1])})
  end
  return l[1] or algorithm(l[6]), l[2], l[3], l[4], tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), l[5]
end

local replies, k0, a, clock = {}, 0, 2 + 5 * nlimits, nil
while a <= #ARGV do
  local count = tonumber(ARGV[a + 1])
  if not count or count < 1 or k0 + count > #KEYS or a + 1 + 3 * count > #ARGV then
    return redis.error_reply('envoy-rls: malformed batch at argument ' .. a)
  end
  local now = tonumber(ARGV[a])
  if ARGV[a] == '' then
    clock = clock or server_now()
    now = clock
  end
  local ok, res = pcall(decide_run, k0, count, a + 1, now, limit_hit)
  if not ok then
    if type(res) == 'table' and res.err then
      res = {err = res.err}
    else
      res = {err = tostring(res)}
    end
  end
  replies[#replies + 1] = res
  k0, a = k0 + count, a + 2 + 3 * count
end
if k0 ~= #KEYS then
  return redis.error_reply('envoy-rls: batch names ' .. #KEYS .. ' keys, its runs ' .. k0)
end
return replies
