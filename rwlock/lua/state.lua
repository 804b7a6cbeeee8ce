-- state: what every rwlock script shares. It reads the server clock once
-- and the lock's hash, and defines the steps the scripts are made of.
--
-- KEYS[1] (P below) is the lock's hash:
--   attempts  the fencing counter: raised by every writer's grant and by
--             the first reader's after a writer, never lowered; a reader's
--             token is its value at the reader's grant
--   rtoken    the counter's value when readers last took it: while the two
--             are equal no writer was granted since, and readers share it
--   rrun      the run_id of the server process in which readers last
--             raised the counter: a reader on another process (the server
--             restarted, or a replica took over) raises it again
--   owner     the writer's owner value; absent when no writer held it since
--             the last writer's release (an expired writer's stays, unused)
--   until     the end of the writer's lease, server ms
--   exp       the hash's own expiry (server ms), or 'inf' when kept for ever
--   gone      until when a record in P:gone may live (server ms)
-- The other keys share its hash tag:
--   P:r   sorted set: reader (owner) -> the end of its lease, server ms
--   P:q   sorted set: waiter (owner) -> its place, a sequence
--   P:qd  sorted set: waiter -> its ticket's deadline, server ms
--   P:qw  sorted set: the waiting writers, owner -> their place in P:q
--   P:gone  sorted set: abandoned owner -> until when it is refused
-- and the channel P:released, on which a change that may let a waiter in
-- is published (an empty message).
--
-- A lease is live while its end is ahead of the server's clock. Readers
-- whose lease ended are dropped by every script that reads P:r, and P:r
-- expires between one and one and a half TTL after the latest grant or
-- extension of a reader. Tickets whose deadline passed are dropped by
-- every script that reads the queue, and the queue's keys expire with
-- their latest ticket's deadline. Tokens are max(attempts + 1, server time
-- in µs): rising on one server whatever its clock does, and across a lost
-- counter (a failover, the hash expired) as long as that clock has not
-- stepped back past the tokens issued before. Lua numbers are exact below
-- 2^53; a counter near it (only a hand edit makes one) is refused before
-- anything is written.
local P = KEYS[1]
local R, Q, QD, QW = P .. ':r', P .. ':q', P .. ':qd', P .. ':qw'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local st = redis.call('HMGET', P, 'attempts', 'owner', 'until', 'exp', 'gone', 'rtoken', 'rrun')
local attempts = tonumber(st[1] or '0')
local exp = st[4]
-- writer: the live writer's owner value, or nil.
local writer = st[2]
local wuntil = tonumber(st[3] or '0')
if writer and wuntil <= now then writer = nil end
if attempts >= 9007199254740992 - 1048576 then
  return redis.error_reply('DLTOKEN attempts ' .. st[1] .. ' is near 2^53')
end

local function fmt(n) return string.format('%.0f', n) end

-- keep(life): keep P for at least life ms from now (a string; '0': for
-- ever), moving its expiry only when it falls short, and then to 1.5 ×
-- life ahead, so that a busy lock pays for a PEXPIRE once in many hours.
local function keep(life)
  local e, ms
  if life == '0' then
    if exp == 'inf' then return end
    e = 'inf'
  else
    ms = tonumber(life)
    if exp and exp ~= 'inf' and tonumber(exp) >= now + ms then return end
    ms = ms + math.floor(ms / 2)
    e = fmt(now + ms)
  end
  redis.call('HSET', P, 'exp', e)
  exp = e
  if e == 'inf' then
    redis.call('PERSIST', P)
  else
    redis.call('PEXPIRE', P, ms)
  end
end

-- hold(ms): P:r lasts at least ms more (see above).
local function hold(ms)
  if redis.call('PTTL', R) < ms then
    redis.call('PEXPIRE', R, ms + math.floor(ms / 2))
  end
end

-- readers(): the number of live readers, once those whose lease ended are
-- dropped.
local function readers()
  redis.call('ZREMRANGEBYSCORE', R, '-inf', fmt(now))
  return redis.call('ZCARD', R)
end

-- prune(): drop the tickets whose deadline passed; returns how many.
local function prune()
  local dead = redis.call('ZRANGE', QD, '-inf', fmt(now), 'BYSCORE')
  for _, o in ipairs(dead) do
    redis.call('ZREM', Q, o)
    redis.call('ZREM', QW, o)
  end
  if #dead > 0 then redis.call('ZREMRANGEBYSCORE', QD, '-inf', fmt(now)) end
  return #dead
end

-- dequeue(owner): drop owner's ticket; returns 1 when it had one.
local function dequeue(owner)
  if redis.call('ZREM', Q, owner) == 0 then return 0 end
  redis.call('ZREM', QD, owner)
  redis.call('ZREM', QW, owner)
  return 1
end

-- wake(): tell the waiters, if any, that the lock may let one in now.
local function wake()
  if redis.call('EXISTS', Q) == 1 then
    redis.call('PUBLISH', P .. ':released', '')
  end
end

-- hint(): ms until the lease that keeps the lock from a waiter may end:
-- the writer's, else the first reader's; 0 when unknown.
local function hint()
  if writer then return math.max(0, wuntil - now) end
  local first = redis.call('ZRANGE', R, 0, 0, 'WITHSCORES')
  if not first[2] then return 0 end
  return math.max(0, tonumber(first[2]) - now)
end

-- stale(): the refusal of a holder that no longer holds its lease, with
-- the counter's value.
local function stale()
  return redis.error_reply('DLSTALE ' .. fmt(attempts))
end
