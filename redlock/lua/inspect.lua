-- inspect: one node's view of a lock, and whether the node sits out.
-- Writes nothing.
--
-- KEYS[1..5]  lock, fence counter, floor, epoch record, repair mark
--
-- Replies {owner (empty when none), pttl, counter, floor, now µs, stamp µs,
-- repaired}. stamp is when the node's sit-out began, as its next vote
-- would judge it (epoch.lua, whose cases this follows without stamping):
-- the record's time; the running process's start when another process
-- stamped the record; now when the record is missing (its first vote
-- stamps it) or ahead of the clock; 0 for a record repaired after a step
-- back. It is -1 when the server refuses INFO to scripts. repaired is 1
-- when the repair mark matches the record the vote would keep.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local o = redis.call('GET', KEYS[1]) or ''
local p = redis.call('PTTL', KEYS[1])
local c = redis.call('GET', KEYS[2]) or '0'
local f = redis.call('GET', KEYS[3]) or '0'
local e = redis.call('GET', KEYS[4])
local rm = redis.call('GET', KEYS[5])
local ok, info = pcall(redis.call, 'INFO', 'server')
local run = ok and string.match(info, 'run_id:(%x+)')
if not run then return {o, p, c, f, now, -1, 0} end
local at, by
if e then at, by = string.match(e, '^(%d+) (%x+)$') end
at = tonumber(at)
if e and by == run and at and at <= now then
  return {o, p, c, f, now, at, rm == e and 1 or 0}
end
if e and by ~= run then
  local up = tonumber(string.match(info, 'uptime_in_seconds:(%-?%d+)'))
  local sec = math.floor((tonumber(string.match(info, 'server_time_usec:(%d+)')) or now) / 1000000)
  return {o, p, c, f, now, math.min(now, (sec - up + 1) * 1000000), 0}
end
if e and rm == e then return {o, p, c, f, now, 0, 1} end
return {o, p, c, f, now, now, 0}
