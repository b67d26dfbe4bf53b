-- bucket decides a token_bucket or leaky_bucket hit of a joint run with the
-- native operations that bucket.go plans (op, as luaOp renders it: "cond|
-- sat|ttl|flags"). A bucket's state is an unsigned 63-bit field of
-- nanoseconds, which Lua's doubles cannot hold exactly: the script moves it
-- with BITFIELD, as a lone hit's pipeline does, never with arithmetic of its
-- own, and answers the state as it found it, from which the store decides
-- with the Go algorithm and checks the verdict given here.
--
-- cond adds the hit's cost if it fits, and its third reply tells whether it
-- did; sat moves the state whatever it holds (a refund, or a count_refused
-- charge once cond has refused). A peek runs the plan of a hit of cost 1
-- and undoes it. The undo it returns restores the state as it was, for a
-- run that is refused.

-- bucket_args splits a list of BITFIELD arguments.
local function bucket_args(s)
  local args = {}
  for a in string.gmatch(s, '%S+') do
    args[#args + 1] = a
  end
  return args
end

local function bucket(key, n, t, b, cost, now, maxdelay, countrefused, op)
  local cond, sat, ttl, flags = match(op or '', '^([^|]*)|([^|]*)|(%d+)|(%a*)$')
  if not cond then
    error({err = 'envoy-rls: malformed bucket operation ' .. tostring(op)})
  end
  local raw = call('GET', key)
  if raw and #raw ~= 16 then
    malformed(key)
  end
  local allowed, moved = false, false
  if cond ~= '' then
    -- The fifth reply is the conditional add's (bucket.go, replyCond).
    local r = call('BITFIELD', key, unpack(bucket_args(cond)))
    allowed = r[5] ~= false
    moved = allowed
  end
  if sat ~= '' and not allowed then
    call('BITFIELD', key, unpack(bucket_args(sat)))
    allowed = cost < 0 -- a refund; a count_refused charge was refused
    moved = true
  end
  if moved then
    if flags == 'nx' then
      call('PEXPIRE', key, ttl, 'NX')
    else
      call('PEXPIRE', key, ttl)
    end
  end
  local function undo()
    if raw then
      call('SET', key, raw, 'KEEPTTL')
    else
      call('DEL', key)
    end
  end
  if flags == 'peek' and moved then
    undo()
    moved = false
  end
  if not moved then
    undo = nil
  end
  return allowed, raw or '', 0, 0, 0, nil, undo
end
algorithms.tb = bucket
algorithms.lb = bucket
