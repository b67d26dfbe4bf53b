-- The tail of the batch script: many runs, each as single.lua would decide
-- it, in one call, so that Redis pays for one script call, not one per run.
-- Only for a single Redis: the keys of a batch need not share a slot.
--
-- KEYS = the keys of every run, in order. ARGV = for each run: now in
-- microseconds (empty: the server's TIME, read once per call), the number
-- of hits, then seven fields per hit, as decide_run reads them.
--
-- Returns one element per run: its four integers per hit, or an error
-- reply. A run that fails leaves the others decided, as separate scripts
-- would.
local replies, k0, a, clock = {}, 0, 1, nil
while a <= #ARGV do
  local count = tonumber(ARGV[a + 1])
  if not count or count < 1 or k0 + count > #KEYS or a + 1 + 7 * count > #ARGV then
    return redis.error_reply('envoy-rls: malformed batch at argument ' .. a)
  end
  local now = tonumber(ARGV[a])
  if ARGV[a] == '' then
    clock = clock or server_now()
    now = clock
  end
  local ok, res = pcall(decide_run, k0, count, a + 1, now)
  if not ok then
    if type(res) == 'table' and res.err then
      res = {err = res.err}
    else
      res = {err = tostring(res)}
    end
  end
  replies[#replies + 1] = res
  k0, a = k0 + count, a + 2 + 7 * count
end
if k0 ~= #KEYS then
  return redis.error_reply('envoy-rls: batch names ' .. #KEYS .. ' keys, its runs ' .. k0)
end
return replies
