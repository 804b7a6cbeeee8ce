-- state: what every permits script shares. It reads the server clock once
-- and the name's hash, and defines the transitions the scripts are made of.
--
-- KEYS[1] (P below) is the name's hash:
--   attempts  the fencing counter: raised by every grant, never lowered
--   s<slot>   the token last granted for slot <slot> (for DLSTALE replies)
--   exp       the hash's own expiry (server ms), or 'inf' when kept for ever
--   gone      until when a record in P:gone may live (server ms)
-- The other keys share its hash tag:
--   P:h   sorted set: holder (owner) -> the end of its permit, server ms
--   P:s   hash: holder -> 'token slot'
--   P:n   sorted set: slot -> slot, the slots of live holders
--   P:q   sorted set: waiter (owner) -> its place, a sequence
--   P:qx  hash: waiter -> its ticket, 'deadline cap TTL life[ by]' (server
--         ms, the waiter's N, its TTL in ms, the hash's lifetime in ms,
--         and the ID of the Semaphore it waits in, when it said)
--   P:gone  sorted set: abandoned owner -> until when it is refused
-- and the channel P:released, on which a grant to a waiter is published.
--
-- A permit is live while its end is ahead of the server's clock. The holder
-- keys (h, s, n) always hold the same holders; an expired holder is dropped
-- by the next script that prunes, and the three keys expire together
-- between one and one and a half TTL after the latest grant or extension
-- (stretch, in the engine's keep.lua), so holders that all died leave
-- nothing behind. Tokens are drawn from attempts (draw, in
-- internal/engine/lua/token.lua, which comes first); a counter near 2^53
-- (only a hand edit makes one) is refused before anything is written.
local P = KEYS[1]
local H, S, SLOTS, Q, QX = P .. ':h', P .. ':s', P .. ':n', P .. ':q', P .. ':qx'
local st = redis.call('HMGET', P, 'attempts', 'exp', 'gone')
local attempts = tonumber(st[1] or '0')
local exp = st[2]
local drawn, bad = draw(st[1], 'attempts')
if not drawn then return bad end

-- drop(owner, v): remove a holder whose P:s entry is v.
local function drop(owner, v)
  redis.call('ZREM', H, owner)
  redis.call('HDEL', S, owner)
  redis.call('ZREM', SLOTS, string.match(v, ' (%d+)$'))
end

-- prune(): drop the holders whose permit has ended.
local function prune()
  local dead = redis.call('ZRANGE', H, '-inf', fmt(now), 'BYSCORE')
  for _, o in ipairs(dead) do
    local v = redis.call('HGET', S, o)
    if v then drop(o, v) else redis.call('ZREM', H, o) end
  end
end

-- free_slot(): the lowest slot no live holder has. The slots in use are
-- distinct integers >= 0 in order: the one at rank i is i exactly when no
-- slot below it is free, so a binary search on ranks finds the first gap.
local function free_slot()
  local lo, hi = 0, redis.call('ZCARD', SLOTS)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local s = tonumber(redis.call('ZRANGE', SLOTS, mid, mid, 'WITHSCORES')[2])
    if s > mid then hi = mid else lo = mid + 1 end
  end
  return lo
end

-- give(owner, ms, life): grant owner a permit for ms, keeping P for life;
-- returns its token and slot.
local function give(owner, ms, life)
  local a = draw(attempts, 'attempts')
  attempts = a
  local slot = free_slot()
  local token = fmt(a)
  redis.call('ZADD', H, fmt(now + ms), owner)
  redis.call('HSET', S, owner, token .. ' ' .. slot)
  redis.call('ZADD', SLOTS, slot, slot)
  stretch(ms, H, S, SLOTS)
  redis.call('HSET', P, 'attempts', token, 's' .. slot, token)
  exp = kept(exp, life)
  return a, slot
end

-- serve(caller, by): hand free permits to the waiters at the head of the
-- queue, first come first served, while the head's own N leaves room: a
-- head whose N is at most the live permits waits, and so does everyone
-- behind it. Heads whose ticket deadline passed are dropped. A waiter's
-- permit ends at its TTL or its ticket's deadline, whichever comes first,
-- so a waiter that never hears of its grant holds it no longer than its
-- ticket held the queue up before; the grant is published on
-- P:released as 'owner token slot' (the owner's first 32 characters, its
-- random part). caller, when set, is the owner whose claim runs this: its
-- grant is returned, not published, and runs its whole TTL. by, when
-- set, is the ID of the Semaphore whose release runs this: a waiter of
-- that Semaphore is in the releaser's process, which hands it the grant
-- from the reply (release.lua): the grant is kept in handed, not
-- published, and runs the waiter's whole TTL, as the releaser's permit
-- would have, had the process died holding it.
local handed
local function serve(caller, by)
  local count = redis.call('ZCARD', H)
  local mine
  while true do
    local head = redis.call('ZRANGE', Q, 0, 0)[1]
    if not head then break end
    local deadline, cap, ttl, life, sem = string.match(redis.call('HGET', QX, head) or '', '^(%d+) (%d+) (%d+) (%d+) ?(%x*)$')
    deadline = tonumber(deadline)
    local live = deadline and deadline > now
    if live and count >= tonumber(cap) then break end
    redis.call('ZREM', Q, head)
    redis.call('HDEL', QX, head)
    if live then
      local ms = tonumber(ttl)
      local near = by and by ~= '' and sem == by
      if head ~= caller and not near then ms = math.min(ms, deadline - now) end
      local a, slot = give(head, ms, life)
      count = count + 1
      if head == caller then
        mine = {a, slot}
      else
        if near then
          handed = handed or {}
          handed[#handed + 1] = head
          handed[#handed + 1] = fmt(a)
          handed[#handed + 1] = tostring(slot)
        else
          redis.call('PUBLISH', P .. ':released', string.sub(head, 1, 32) .. ' ' .. fmt(a) .. ' ' .. slot)
        end
      end
    end
  end
  return mine
end
