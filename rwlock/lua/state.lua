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
-- extension of a reader (stretch, in the engine's keep.lua). Tickets
-- whose deadline passed are dropped by every script that reads the queue,
-- and the queue's keys expire with their latest ticket's deadline. Tokens
-- are drawn from attempts (draw in internal/engine/lua/token.lua, which
-- comes first); a counter near 2^53 (only a hand edit makes one) is
-- refused before anything is written.
local P = KEYS[1]
local R, Q, QD, QW = P .. ':r', P .. ':q', P .. ':qd', P .. ':qw'
local st = redis.call('HMGET', P, 'attempts', 'owner', 'until', 'exp', 'gone', 'rtoken', 'rrun')
local attempts = tonumber(st[1] or '0')
local exp = st[4]
-- writer: the live writer's owner value, or nil.
local writer = st[2]
local wuntil = tonumber(st[3] or '0')
if writer and wuntil <= now then writer = nil end
local drawn, bad = draw(st[1], 'attempts')
if not drawn then return bad end

-- readers(): the number of live readers, once those whose lease ended are
-- dropped.
local function readers()
  redis.call('ZREMRANGEBYSCORE', R, '-inf', fmt(now))
  return redis.call('ZCARD', R)
end

-- drop_lapsed(): drop the tickets whose deadline passed; returns how many.
local function drop_lapsed()
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
  return first_left(R)
end
