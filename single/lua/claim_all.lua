-- claim_all: take the locks of every key in KEYS for one owner, all of them
-- or none.
--
-- KEYS     the locks' hashes, each in claim.lua's layout: a lock held here
--          is held against claim.lua's callers too, and the other way round
-- ARGV[1]  owner
-- ARGV[2]  TTL, ms
-- ARGV[3]  each hash's lifetime, ms ('0': for ever; see keep.lua)
-- ARGV[4]  for a blocking waiter, how long its tickets last, ms (absent for
--          TryAcquireAll)
--
-- Replies {token, ...}, one per key in KEYS' order, when claimed; and
-- {-1, ms the longest holder has left, 1 when queued else 0} when refused.
--
-- A key is free to this owner when nobody holds it (or its lease ran out),
-- and its queue is empty or has this owner at its head; or when this owner
-- holds it with time left: its own claim run again (a client re-sent it),
-- or a key a release handed to it as a waiter (see handoff.lua). Only when
-- every key is free does the script write: each key not already this
-- owner's gets a new token, max(attempts + 1, server µs), as claim.lua
-- gives; a key already its own keeps its token; every lease runs a TTL
-- from now.
--
-- Otherwise a waiter's tickets stand in the queue of every key it does not
-- hold ('deadline TTL lifetime', as claim.lua writes them, so a release
-- hands a key over to it the same way), all joined in this one script: the
-- queues order the waiters of overlapping sets alike, so the one ahead in
-- one queue is ahead in every queue they share, and no two waiters wait
-- for each other. A waiter missing from one of its queues (a ticket that
-- lapsed there) leaves them all and joins them all again at the back, to
-- keep that order. A key handed to a waiter that cannot take the rest yet
-- stays its own until that handed lease ends (its TTL or its ticket's
-- deadline); the script does not run it on.
--
-- An owner recorded in any key's :gone (see abandon_all.lua) is refused.
local n = #KEYS
for i = 1, n do
  K = KEYS[i]
  enrich(ARGV[3])
end
local rs, own, heads = {}, {}, {}
local left, blocked = 0, false
for i = 1, n do
  local k = KEYS[i]
  K = k
  local r = redis.call('HMGET', k, 'owner', 'until', 'attempts', 'waiting', 'gone', 'exp')
  rs[i] = r
  local l = 0
  if r[1] and r[2] then l = tonumber(r[2]) - now end
  if l > 0 and r[1] == ARGV[1] then
    own[i] = true
  elseif l > 0 then
    blocked = true
    if l > left then left = l end
  end
  if buried(ARGV[1], r[5]) then return {-1, left, 0} end
  if not own[i] and l <= 0 and tonumber(r[4] or '0') > 0 then
    -- Drop the dead heads of the queue (head, in queue.lua); the first live
    -- one is the key's next holder.
    local first, dropped = head(k .. ':q', k .. ':qx', ARGV[1])
    local waiting = tonumber(r[4]) - dropped
    if not first then waiting = 0 end
    if waiting ~= tonumber(r[4]) then
      if waiting > 0 then redis.call('HSET', k, 'waiting', waiting) else redis.call('HDEL', k, 'waiting') end
      r[4] = tostring(waiting)
    end
    heads[i] = first
    if first and first ~= ARGV[1] then blocked = true end
  end
end

if not blocked then
  local toks = {}
  for i = 1, n do
    if own[i] then
      toks[i] = tonumber(rs[i][3])
    else
      local a, bad = draw(rs[i][3], 'attempts of ' .. KEYS[i])
      if not a then return bad end
      toks[i] = a
    end
  end
  local upto = fmt(now + tonumber(ARGV[2]))
  for i = 1, n do
    K = KEYS[i]
    local r = rs[i]
    if heads[i] == ARGV[1] then
      redis.call('ZREM', K .. ':q', ARGV[1])
      redis.call('HDEL', K .. ':qx', ARGV[1])
      local w = tonumber(r[4]) - 1
      if w > 0 then redis.call('HSET', K, 'waiting', w) else redis.call('HDEL', K, 'waiting') end
    end
    local exp, ms = keep(r[6], ARGV[3])
    redis.call('HSET', K, 'attempts', fmt(toks[i]), 'owner', ARGV[1], 'until', upto)
    if exp then
      redis.call('HSET', K, 'exp', exp)
      expire(exp, ms)
    end
  end
  return toks
end

if not ARGV[4] then return {-1, left, 0} end
-- Queue on every key not held by this owner: refresh the tickets where they
-- all stand, else leave every queue and join every one at the back.
local whole = true
for i = 1, n do
  if not own[i] and not redis.call('ZSCORE', KEYS[i] .. ':q', ARGV[1]) then
    whole = false
    break
  end
end
local life, rest = tonumber(ARGV[4]), ARGV[2] .. ' ' .. ARGV[3]
for i = 1, n do
  K = KEYS[i]
  local q, qx = K .. ':q', K .. ':qx'
  local r = rs[i]
  local waiting = tonumber(r[4] or '0')
  if not whole and redis.call('ZREM', q, ARGV[1]) == 1 then
    redis.call('HDEL', qx, ARGV[1])
    waiting = waiting - 1
  end
  if not own[i] then
    if not whole then
      enqueue(q, ARGV[1])
      waiting = redis.call('ZCARD', q)
    end
    ticket(q, qx, ARGV[1], life, rest)
  end
  if waiting ~= tonumber(r[4] or '0') then
    if waiting > 0 then redis.call('HSET', K, 'waiting', waiting) else redis.call('HDEL', K, 'waiting') end
    local exp, ms = keep(r[6], ARGV[3])
    if exp then
      redis.call('HSET', K, 'exp', exp)
      expire(exp, ms)
    end
  end
end
return {-1, left, 1}
