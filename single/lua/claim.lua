-- claim: take the lock for an owner, or say how long it stays held.
--
-- KEYS[1]  the lock's hash: owner, until (server ms), attempts (the token),
--          waiting (tickets in the queue; absent at 0), gone (when the
--          latest gone record lapses, server ms; absent when none may
--          live), exp (the expiry last set on the hash, server ms, or
--          'inf'; see keep in the engine's keep.lua)
-- ARGV[1]  owner
-- ARGV[2]  TTL, ms
-- ARGV[3]  the hash's lifetime, ms: the TTL plus the idle TTL ('0': for ever)
-- ARGV[4]  for a blocking waiter, how long its ticket lasts, ms (absent for
--          TryAcquire and the first attempt)
--
-- Replies the new attempts, a plain integer, when claimed (cheaper for the
-- clients to read than an array), and {ms the holder has left, place in the
-- queue (1: its head; 0: not queued), attempts} when refused; a claim
-- without a ticket that finds the lock held is told {ms, 0} alone, as
-- fast_claim.lua tells it. A waiter
-- takes a handoff only when its token is above the attempts of its latest
-- refusal: a message of an older one, heard late, names a lease that ended
-- before that refusal ran (see handoff.lua).
--
-- A claim by the owner that holds the lock replies the attempts it was
-- granted, and the lease runs a TTL from now: the claim ran again (a
-- client re-sent it after its reply was lost), or a release handed the lock
-- to this waiter and the message saying so was missed (see handoff.lua).
--
-- Waiters queue in KEYS[1]..':q', a sorted set of owners scored by a
-- sequence, with each ticket in KEYS[1]..':qx': 'deadline TTL lifetime'
-- (server ms; the waiter's ARGV[2] and ARGV[3], for a handoff). A
-- free lock goes to the head of the queue, or to anyone when it is empty:
-- a claim without a ticket does not overtake queued waiters. A waiter that
-- is refused joins the queue (or refreshes its deadline); heads whose
-- deadline passed are dropped, so a waiter that died holds the lock up for
-- one ticket lifetime at most. Both queue keys expire with their last
-- ticket's deadline.
--
-- An owner recorded in KEYS[1]..':gone' (see abandon.lua) until a time still
-- ahead is refused: its claim is a late one. The hash's gone field says
-- whether any record may still hold, so that a claim reads :gone only
-- then: the fast path (a free lock, no waiters, no gone records) makes
-- three calls, TIME, HMGET and HSET, and a PEXPIRE only when the hash's
-- expiry needs to move (see keep.lua). A plain claim on a held
-- lock is answered before any other key is read, so that a contender for
-- a held lock whose cluster slot is migrating is told it is taken; every
-- path reads a key of its own before it writes anything, so a source that
-- refuses the look at a key it no longer has refuses before anything
-- changed.
--
-- The new attempts is draw(attempts) (see token.lua): max(attempts + 1,
-- server time in µs), a counter near 2^53 refused before anything is
-- written; fmt writes it back as the decimal integer HINCRBY would have,
-- so extend and release compare tokens as exact strings.
-- A lock in the lean form comes here to queue a waiter (or to be kept for
-- ever) and becomes the hash first; the queue's key is looked at before
-- that write, so that the source of a migrating cluster slot, which no
-- longer has it, refuses the claim before anything changed.
if type(v) == 'string' then
  redis.call('EXISTS', KEYS[1] .. ':q')
  enrich(ARGV[3], v)
end
local r = redis.call('HMGET', KEYS[1], 'owner', 'until', 'attempts', 'waiting', 'gone', 'exp')
local left = 0
if r[1] and r[2] then left = tonumber(r[2]) - now end
if left > 0 then
  if r[1] == ARGV[1] then
    -- Its own claim run again, or a waiter that missed the message of a
    -- grant: the lease runs a TTL from now, as the caller counts it.
    local exp, ms = keep(r[6], ARGV[3])
    redis.call('HSET', KEYS[1], 'until', fmt(now + tonumber(ARGV[2])))
    if exp then
      redis.call('HSET', KEYS[1], 'exp', exp)
      expire(exp, ms)
    end
    return tonumber(r[3])
  end
  if not ARGV[4] then return {left, 0} end
end
if buried(ARGV[1], r[5]) then return {math.max(left, 0), 0, tonumber(r[3] or '0')} end
local waiting = tonumber(r[4] or '0')
local counted = waiting
local q, qx
if waiting > 0 or ARGV[4] then q, qx = KEYS[1] .. ':q', KEYS[1] .. ':qx' end
if left <= 0 then
  local a, bad = draw(r[3], 'attempts')
  if not a then return bad end
  local first
  if waiting > 0 then
    local dropped
    first, dropped = head(q, qx, ARGV[1])
    waiting = waiting - dropped
    if not first then waiting = 0 end
  end
  if not first or first == ARGV[1] then
    if first then
      redis.call('ZREM', q, first)
      redis.call('HDEL', qx, first)
      waiting = waiting - 1
    end
    if waiting == 0 and counted > 0 then redis.call('HDEL', KEYS[1], 'waiting') end
    if waiting > 0 and waiting ~= counted then redis.call('HSET', KEYS[1], 'waiting', waiting) end
    local exp, ms = keep(r[6], ARGV[3])
    if exp then
      redis.call('HSET', KEYS[1], 'attempts', fmt(a),
        'owner', ARGV[1], 'until', fmt(now + tonumber(ARGV[2])), 'exp', exp)
      expire(exp, ms)
    else
      redis.call('HSET', KEYS[1], 'attempts', fmt(a),
        'owner', ARGV[1], 'until', fmt(now + tonumber(ARGV[2])))
    end
    return a
  end
  left = 0
end
local rank
if ARGV[4] then
  local _, added = enqueue(q, ARGV[1])
  if added then
    waiting = redis.call('ZCARD', q)
    rank = waiting - 1
  else
    rank = redis.call('ZRANK', q, ARGV[1])
  end
  ticket(q, qx, ARGV[1], tonumber(ARGV[4]), ARGV[2] .. ' ' .. ARGV[3])
end
if waiting == 0 and counted > 0 then redis.call('HDEL', KEYS[1], 'waiting') end
if waiting > 0 and waiting ~= counted then redis.call('HSET', KEYS[1], 'waiting', waiting) end
if rank then return {left, rank + 1, tonumber(r[3] or '0')} end
return {left, 0, tonumber(r[3] or '0')}
