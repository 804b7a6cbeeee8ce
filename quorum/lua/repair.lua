-- repair: raise the floor of a node that lost its data, once it sat out.
--
-- KEYS  epoch record, floor, high-water mark, repair mark
-- ARGV  the epoch record it is repaired for, the new floor
--
-- Only if the record is still ARGV[1]: floor = max(floor, ARGV[2]), high =
-- max(high, floor), repair mark = the record. Replies 1 when repaired, 0
-- when the record changed (the node lost its data again).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local f = redis.call('GET', KEYS[2]) or '0'
if tonumber(ARGV[2]) > tonumber(f) then
  f = ARGV[2]
  redis.call('SET', KEYS[2], f)
end
if tonumber(f) > tonumber(redis.call('GET', KEYS[3]) or '0') then redis.call('SET', KEYS[3], f) end
redis.call('SET', KEYS[4], ARGV[1])
return 1
