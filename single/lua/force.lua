-- force: an operator's break: end whatever lease holds the lock, in either
-- form, and raise its token as a claim does, so that a fence shown the
-- break's token refuses every earlier one, the old holder's included. It
-- is a claim taken whoever holds the lock, and its release, in one step.
--
-- KEYS[1]  the lock: the lean string (see fast_claim.lua) or claim.lua's
--          hash; K
-- ARGV[1]  how long the key keeps its counter, ms ('0': for ever), as
--          fast_release.lua's ARGV[3]
-- ARGV[2]  the break's id, random
-- ARGV[3]  how long to remember the break, ms
--
-- Replies {the old owner (empty when none), the old attempts ('0' for
-- none), the break's token, ms the old lease had left (<= 0: nobody held
-- the lock)}. The break's token is draw(attempts) (see token.lua), as a
-- claim's: max(attempts + 1, server µs), above every token handed out for
-- the key. A key nobody holds, or that does not exist, gets one all the
-- same. The lock is then free, as after a release: a lean key becomes
-- 'token', expiring after ARGV[1]; a hash has its attempts raised and is
-- freed (handoff.lua): handed to its first live waiter, whose token is
-- above the break's, and the release channel says so, or left free. The
-- old holder's extend and release then find another token (DLSTALE), and
-- its lease is lost; a release of it run again is not taken for its own
-- (freed holds the break's token).
--
-- A break runs once: K..':broke' keeps the id and the reply of the latest
-- break for ARGV[3] ms, and the same break run again (a client re-sent it
-- after its reply was lost) gets that reply and changes nothing. Run
-- again as a new break, it would end the lease the first run handed to a
-- waiter, and report that one.
local rec = K .. ':broke'
local last = redis.call('HMGET', rec, 'id', 'owner', 'was', 'tok', 'left')
if last[1] == ARGV[2] then return {last[2], last[3], last[4], tonumber(last[5])} end
local function broke(owner, was, tok, left)
  redis.call('HSET', rec, 'id', ARGV[2], 'owner', owner, 'was', was, 'tok', tok, 'left', left)
  redis.call('PEXPIRE', rec, ARGV[3])
  return {owner, was, tok, left}
end
local v = redis.pcall('GET', K)
if type(v) ~= 'table' then
  local a, own
  if v then
    a, own = lean(v)
    if not a then a = v end
  end
  local left = 0
  if own then left = redis.call('PTTL', K) end
  local n, bad = draw(a, 'attempts')
  if not n then return bad end
  setpx(K, fmt(n), ARGV[1])
  if own then redis.call('PUBLISH', K .. ':released', '') end
  return broke(own or '', a or '0', fmt(n), left)
end
local r = redis.call('HMGET', K, 'owner', 'attempts', 'until', 'waiting', 'exp')
local left = 0
if r[1] and r[3] then left = tonumber(r[3]) - now end
local n, bad = draw(r[2], 'attempts')
if not n then return bad end
local tok = fmt(n)
redis.call('HSET', K, 'attempts', tok)
free(tok, kept(r[5], ARGV[1]), r[4])
if left > 0 and not r[4] then redis.call('PUBLISH', K .. ':released', '') end
return broke(r[1] or '', r[2] or '0', tok, left)
