-- core: the prelude of every script of the single-server primitives
-- (single, permits, rwlock, claims; see internal/claimcore). It reads the
-- server's clock once, and every lease, ticket and record is judged by it:
--   t, now, us   TIME's reply, and the same in ms and in µs
--   K            the key's hash the helpers below act on: KEYS[1], or, in a
--                script on several keys, each of KEYS in turn
-- and defines the steps every primitive's scripts share: fmt and draw
-- (tokens), keep, expire and kept (the idle expiry). gone.lua (bury and
-- buried, the gone owners) and queue.lua (enqueue, ticket and head, the
-- ticket queue) follow it in the scripts that call them.
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
