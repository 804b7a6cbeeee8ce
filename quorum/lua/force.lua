-- force: an operator's break on one node, phase 1 of a forced claim. It
-- follows one epoch_*.lua (vote_epoch) and one reply*.lua, as vote.lua
-- does.
--
-- KEYS[1..5]  as vote.lua's: lock, gone, queue, queue deadlines, epoch
--             record; with tokens also fence counter, floor, high-water
--             mark, repair mark
-- ARGV[1]     owner (the break's)
-- ARGV[2]     TTL, ms
--
-- Sets the lock for the break's owner whoever holds it, and whatever the
-- queue, and replies as vote.lua does for a lock set for its owner (status
-- 1, and with tokens the node's counters, from which the break's token is
-- drawn and then committed as an acquisition's is), followed by the owner
-- it replaced (empty for none) and that owner's ms left. The break then
-- releases its lock as a lease does, waking the waiters. An owner given up
-- is refused as vote.lua refuses it: a late call of a break that failed.
local e = vote_epoch()
if type(e) == 'table' then return e end
if gone(KEYS[2], ARGV[1], now) then return {3, 0, us, e} end
local old = redis.call('GET', KEYS[1])
local p = redis.call('PTTL', KEYS[1])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local r = reply(1, 0, e)
r[#r + 1] = old or ''
r[#r + 1] = math.max(p, 0)
return r
