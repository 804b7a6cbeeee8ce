-- core: the prelude of every script of the single-server primitives
-- (single, permits, rwlock, claims; see internal/claimcore). It reads the
-- server's clock once, and every lease, ticket and record is judged by it:
--   t, now, us   TIME's reply, and the same in ms and in µs
--   K            the key's hash the helpers below act on: KEYS[1], or, in a
--                script on several keys, each of KEYS in turn
-- and defines the steps every primitive's scripts share: fmt and draw
-- (tokens), keep, expire and kept (the idle expiry), bury and buried (the
-- gone owners), enqueue, ticket and head (the ticket queue).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local K = KEYS[1]

-- fmt(n): n as the decimal integer HINCRBY would have written, so that
-- tokens compare as exact strings. Lua numbers are doubles, exact below
-- 2^53 (µs since 1970 are ~2^51).
local function fmt(n) return string.format('%.0f', n) end

-- draw(a, what): the token after counter a (a string, or nil for none),
-- max(a + 1, server time in µs): the +1 keeps tokens rising on one server
-- whatever its clock does; the floor keeps them rising across a lost
-- counter (a failover that lost the latest grants, a hash that expired
-- after its idle life) while the server's clock is not behind the one
-- that issued the lost tokens by more than the time between the grants.
-- A counter at or past 2^53 - 2^20 (only a hand edit makes one) is not
-- drawn from: draw returns nil and the DLTOKEN error reply naming what,
-- which the script returns before it writes anything.
local function draw(a, what)
  local n = tonumber(a or '0')
  if n >= 9007199254740992 - 1048576 then
    return nil, redis.error_reply('DLTOKEN ' .. what .. ' ' .. (a or '0') .. ' is near 2^53')
  end
  return math.max(n + 1, us)
end

-- keep(exp, life) and expire(exp, ms): keep K for at least life ms from
-- now (a string; '0': for ever), moving its expiry only when it must. exp
-- is the hash's exp field: the expiry last set, server ms, or 'inf' after
-- a PERSIST. A hash whose expiry is due before now + life gets now + 1.5 ×
-- life, so that the next hours of claims and extensions set none: the hash
-- outlives its last lease by between the idle life and one and a half
-- times it. keep returns the new exp field, to be written with the
-- script's HSET, and the ms to expire in; nil when the expiry stays.
-- expire then applies it, after the HSET: an expiry set on a hash that
-- does not exist yet is lost. exp is the real expiry: every script that
-- sets one writes it, and none moves it earlier, but for a hash kept for
-- ever (exp 'inf') that a Locker with a finite idle life claims.
local function keep(exp, life)
  if life == '0' then
    if exp == 'inf' then return nil end
    return 'inf'
  end
  local ms = tonumber(life)
  if exp and exp ~= 'inf' and tonumber(exp) >= now + ms then return nil end
  local set = ms + math.floor(ms / 2)
  return fmt(now + set), set
end
local function expire(exp, ms)
  if exp == 'inf' then
    redis.call('PERSIST', K)
  elseif exp then
    redis.call('PEXPIRE', K, ms)
  end
end

-- kept(exp, life): keep and expire in one step, with an HSET of its own;
-- returns the exp field as it now stands.
local function kept(exp, life)
  local e, ms = keep(exp, life)
  if not e then return exp end
  redis.call('HSET', K, 'exp', e)
  expire(e, ms)
  return e
end

-- bury(owner, ms, g, alone): remember owner as given up for ms, so that its
-- claim, should it land later (held up in a network path or behind a
-- paused server), is refused (see buried). The records are a sorted set,
-- K..':gone', scored by the server ms until which each holds: those that
-- lapsed are dropped whenever one is added, and the key expires with its
-- last. g is the hash's gone field as read (nil or false for none): it
-- tells claims to read :gone, so it must last as long as the record, and
-- so must the hash (one created here, by a claim that never landed,
-- expires with the record); a hash's expiry only ever moves later, and its
-- exp field follows it. alone writes the record alone (a queue of claims
-- reads :gone at every claim).
local function bury(owner, ms, g, alone)
  local set = K .. ':gone'
  local upto = now + ms
  redis.call('ZREMRANGEBYSCORE', set, '-inf', fmt(now))
  redis.call('ZADD', set, fmt(upto), owner)
  if redis.call('PTTL', set) < ms then
    redis.call('PEXPIRE', set, ms)
  end
  if alone then return end
  local p = redis.call('PTTL', K)
  if p == -2 or p >= 0 and p < ms then
    redis.call('HSET', K, 'gone', fmt(math.max(upto, tonumber(g or '0'))), 'exp', fmt(upto))
    redis.call('PEXPIRE', K, ms)
  elseif not g or tonumber(g) < upto then
    redis.call('HSET', K, 'gone', fmt(upto))
  end
end

-- buried(owner, g): whether owner's claim is refused as given up (bury),
-- g being the hash's gone field as read; a gone field that lapsed is
-- removed, and :gone, with nothing in it still live, is not read.
local function buried(owner, g)
  if not g then return false end
  if tonumber(g) <= now then
    redis.call('HDEL', K, 'gone')
    return false
  end
  local s = redis.call('ZSCORE', K .. ':gone', owner)
  return s and tonumber(s) > now or false
end

-- The ticket queue of a key's blocking waiters, first come first served:
-- a sorted set q of the waiting owners scored by arrival, and beside it
-- each owner's ticket, which says until when (server ms) the owner keeps
-- its place: a waiter that died or gave up holds the queue up no longer.

-- enqueue(q, owner): owner's place in q, at its tail when it had none;
-- the second result is true when owner was added.
local function enqueue(q, owner)
  local place = redis.call('ZSCORE', q, owner)
  if place then return tonumber(place), false end
  local last = redis.call('ZRANGE', q, -1, -1, 'WITHSCORES')
  place = tonumber(last[2] or '0') + 1
  redis.call('ZADD', q, place, owner)
  return place, true
end

-- ticket(q, qx, owner, life, rest): write owner's ticket in the hash qx,
-- 'deadline rest', its deadline now + life ms, and keep q and qx at least
-- that long (they expire with their last ticket).
local function ticket(q, qx, owner, life, rest)
  redis.call('HSET', qx, owner, fmt(now + life) .. ' ' .. rest)
  if redis.call('PTTL', q) < life then
    redis.call('PEXPIRE', q, life)
    redis.call('PEXPIRE', qx, life)
  end
end

-- head(q, qx, owner): the first owner in q whose ticket in qx has not run
-- out (owner itself counts whatever its ticket says), after dropping those
-- ahead of it whose ticket did; nil for none. The second result counts
-- the tickets dropped.
local function head(q, qx, owner)
  local dropped = 0
  local h = redis.call('ZRANGE', q, 0, 0)[1]
  while h and h ~= owner and tonumber(string.match(redis.call('HGET', qx, h) or '0', '^%d+') or '0') <= now do
    redis.call('ZREM', q, h)
    redis.call('HDEL', qx, h)
    dropped = dropped + 1
    h = redis.call('ZRANGE', q, 0, 0)[1]
  end
  return h, dropped
end
