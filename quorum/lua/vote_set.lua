-- vote_set: phase 1 of an acquisition of several locks at once on one
-- node: it grants all of them to the owner, or none. It follows one
-- epoch_*.lua (vote_epoch) and one reply_set*.lua (set_reply, more), as
-- vote.lua follows its own.
--
-- KEYS[1..5]  the first lock's lock, gone, queue, queue deadlines, then
--             the epoch record; with tokens also its fence counter, the
--             floor, the high-water mark and the repair mark (KEYS[6..9])
-- KEYS[more..] for each other lock, five keys: lock, gone, queue, queue
--             deadlines, fence counter
-- ARGV[1..5]  as vote.lua: owner, TTL ms, waiter (empty for none), its
--             score, its ticket life ms
-- ARGV[6]     the number of locks
--
-- Status as vote.lua's, for the whole set: 1 when every lock is set for
-- this owner; else 0 when any lock is held by another owner (pttl is then
-- the longest such lock's remaining time), 2 when every lock is free or
-- this owner's but one of them is promised to an earlier waiter, 3 when
-- the owner was given up. Each lock follows vote.lua's rules; the set is
-- granted only when each of them would be, and then all are set, with the
-- same TTL. A vote run again by the owner that made it finds every lock
-- its own. A waiter refused takes a ticket (or keeps its first score) in
-- the queue of every lock of the set: every queue orders waiters by the
-- same scores, so the earliest waiter heads every queue it is in, and
-- waiters for overlapping sets cannot block each other in a cycle.
local function key(j, o)
  if j == 1 then return KEYS[o + 1] end
  return KEYS[more + 5 * (j - 2) + o]
end
local function gone_any(k, id, ms)
  for j = 1, k do
    if gone(key(j, 1), id, ms) then return true end
  end
  return false
end
local e = vote_epoch()
if type(e) == 'table' then return e end
local k = tonumber(ARGV[6])
local st, p, mine = 1, 0, 0
for j = 1, k do
  local l = key(j, 0)
  local pt = redis.call('PTTL', l)
  if pt == -2 then
    local h = head(key(j, 2), key(j, 3), ARGV[3])
    if h and h ~= ARGV[3] and st == 1 then st = 2 end
  elseif redis.call('GET', l) == ARGV[1] then
    mine = mine + 1
  else
    st = 0
    if pt > p then p = pt end
  end
end
if st == 1 and mine < k then
  if gone_any(k, ARGV[1], now) then return {3, 0, us, e} end
  for j = 1, k do
    local l = key(j, 0)
    if redis.call('EXISTS', l) == 0 then redis.call('SET', l, ARGV[1], 'PX', ARGV[2]) end
  end
end
if st ~= 1 and ARGV[3] ~= '' then
  if gone_any(k, ARGV[1], now) then return {3, 0, us, e} end
  for j = 1, k do
    join(key(j, 2), ARGV[3], ARGV[4])
    ticket(key(j, 2), key(j, 3), ARGV[3], tonumber(ARGV[5]))
  end
end
return set_reply(st, p, e, k)
