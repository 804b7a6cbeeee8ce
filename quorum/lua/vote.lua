-- vote: phase 1 of an acquisition on one node. It follows one
-- epoch_*.lua (vote_epoch) and one reply*.lua, and calls the guard's
-- functions (epoch.lua) and the engine's library (the clock, gone, the
-- queue's join, ticket and head).
--
-- KEYS[1..5]  lock, gone, queue, queue deadlines, epoch record; with tokens
--             also fence counter, floor, high-water mark, repair mark
-- ARGV[1]     owner
-- ARGV[2]     TTL, ms
-- ARGV[3]     waiter (empty for none)
-- ARGV[4]     the waiter's score (its first attempt's time)
-- ARGV[5]     the waiter's ticket life, ms
-- ARGV[6]     the attempt's number among the waiter's
--
-- Status: 0 held by another owner, 1 set for this owner, 2 free but
-- promised to an earlier waiter, 3 this owner was given up (a late vote,
-- refused). It grants the lock to the owner when it is free, the owner was
-- not given up, and the queue is empty or its head is this waiter (the
-- heads ahead of it whose ticket lapsed dropped, its own ticket counting
-- whatever its deadline: see head). A vote
-- run again by the owner that made it (a client that re-sent it after its
-- reply was lost) finds the lock its own, and is the vote it made. A waiter
-- granted keeps its ticket, at the head, until its lease is released:
-- taking it off on a grant left the nodes with different heads whenever the
-- attempt failed overall. A waiter refused joins the queue (or stays,
-- keeping its first score) and its ticket's deadline moves to now + its
-- life; the ticket names this attempt (its TTL and owner, ticket.lua), to
-- which a release may hand the lock (hand.lua); the queue's keys expire
-- with their latest ticket. A lock handed to an earlier attempt of this
-- waiter (the owner its ticket names), which the waiter gave up for this
-- one, is taken by this one whatever the queue's head: the release handed
-- it to this waiter, and a waiter that joined ahead since would otherwise
-- leave it held until its TTL. The ticket then names this attempt, so
-- that the waiter's next one takes the lock over in turn, and this one's
-- release, if it fails, leaves it (release.lua). With tokens, where the
-- grant's token (the ticket's) is still the node's effective counter, the
-- reply carries it after the seven values, as does a vote run again that
-- finds the lock handed to its own attempt; an attempt whose votes carry
-- it holds with it, as the one it was granted to would have (hand.lua's
-- grant; the waiter's rule in ../hand.go). A vote of an earlier attempt
-- than the
-- ticket's, landing late, is refused as any other and leaves the ticket
-- as it is. A vote of an
-- owner given up is refused, with four values in both modes, and does not
-- queue its waiter.
local e = vote_epoch()
if type(e) == 'table' then return e end
local st, p = 0, redis.call('PTTL', KEYS[1])
local free = p == -2
local n, _, had, o, g = tonumber(ARGV[6] or '0')
if ARGV[3] ~= '' then _, _, had, o, g = handed(KEYS[4], ARGV[3]) end
-- carried(): the ticket's granted token while it is still the node's
-- effective counter (tokens only), else nil.
local function carried()
  if not g or g == '0' or not KEYS[6] then return nil end
  local c = tonumber(redis.call('GET', KEYS[6]) or '0')
  local f = tonumber(redis.call('GET', KEYS[7]) or '0')
  if tonumber(g) == math.max(c, f) then return g end
  return nil
end
local later, mine, carry = not had or n > had, false, nil
if not free then
  local v = redis.call('GET', KEYS[1])
  if v == ARGV[1] then
    p, st = 0, 1
    if v == o then carry = carried() end
  else
    mine = later and v == o
    free = mine
  end
end
if free then
  p = 0
  local h = head(KEYS[3], KEYS[4], ARGV[3])
  if h and h ~= ARGV[3] and not mine then
    st = 2
  elseif gone(KEYS[2], ARGV[1], now) then
    return {3, 0, us, e}
  else
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
    st = 1
    if mine then
      carry = carried()
      ticket(KEYS[3], KEYS[4], ARGV[3], tonumber(ARGV[5]), handing(ARGV[2], fmt(n), carry or '0', ARGV[1]))
    end
  end
end
if st ~= 1 and ARGV[3] ~= '' then
  if gone(KEYS[2], ARGV[1], now) then return {3, 0, us, e} end
  join(KEYS[3], ARGV[3], ARGV[4])
  if later or n == had and o == ARGV[1] then
    ticket(KEYS[3], KEYS[4], ARGV[3], tonumber(ARGV[5]), handing(ARGV[2], fmt(n), '0', ARGV[1]))
  end
end
return reply(st, p, e, carry)
