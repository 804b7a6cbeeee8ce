-- inspect: one node's view of a lock, and whether the node sits out.
-- Writes nothing.
--
-- KEYS[1..5]  lock, fence counter, floor, epoch record, repair mark
--
-- Replies {owner (empty when none), pttl, counter, floor, now µs, stamp µs,
-- repaired}. stamp is when the node's sit-out began, as its next vote
-- would judge it (judge in epoch.lua, which this follows the script of):
-- the record's time; the running process's start when another process
-- stamped the record; now when the record is missing (its first vote
-- stamps it) or ahead of the clock; 0 for a record repaired after a step
-- back. It is -1 when the server refuses INFO to scripts. repaired is 1
-- when the repair mark matches the record the vote would keep.
local o = redis.call('GET', KEYS[1]) or ''
local p = redis.call('PTTL', KEYS[1])
local c = redis.call('GET', KEYS[2]) or '0'
local f = redis.call('GET', KEYS[3]) or '0'
local ok, info = pcall(redis.call, 'INFO', 'server')
local rec, _, mark = judge(redis.call('GET', KEYS[4]), ok and info, KEYS[5])
if not rec then return {o, p, c, f, us, -1, 0} end
local repaired = (mark or redis.call('GET', KEYS[5]) == rec) and 1 or 0
return {o, p, c, f, us, tonumber(string.match(rec, '^(%d+) ')), repaired}
