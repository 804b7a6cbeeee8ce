-- commit_set: phase 2 of a set, every lock's token on one voter, all or
-- none.
--
-- KEYS  floor, high-water mark, then for each lock: lock, fence counter
-- ARGV  owner, the counters' lifetime ms ('0': for ever), then each lock's
--       token
--
-- Each lock's token is committed as commit.lua commits one: only while the
-- owner holds the lock and both the lock's counter and the node's floor
-- are lower (a counter already at the token is this commit run again).
-- When any lock fails that, none is committed. Replies 1 when committed,
-- 0 when the owner does not hold every lock, -1 when a counter or the
-- floor is not lower.
local k = (#KEYS - 2) / 2
for j = 1, k do
  if redis.call('GET', KEYS[2 * j + 1]) ~= ARGV[1] then return 0 end
end
local f = tonumber(redis.call('GET', KEYS[1]) or '0')
local cs = {}
for j = 1, k do
  local t = tonumber(ARGV[j + 2])
  local c = tonumber(redis.call('GET', KEYS[2 * j + 2]) or '0')
  if c > t or c < t and f >= t then return -1 end
  cs[j] = c
end
local h = tonumber(redis.call('GET', KEYS[2]) or '0')
local hs
for j = 1, k do
  local t = tonumber(ARGV[j + 2])
  if cs[j] < t then
    setpx(KEYS[2 * j + 2], ARGV[j + 2], ARGV[2])
    if t > h then h, hs = t, ARGV[j + 2] end
  end
end
if hs then redis.call('SET', KEYS[2], hs) end
return 1
