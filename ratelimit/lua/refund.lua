-- refund: undo an admission a quorum refused, exactly, or not at all.
--   KEYS[1]  the limit's key
--   ARGV[1]  the TAT the admission wrote (gcra.lua's fifth reply)
--   ARGV[2]  what the admission added: n × the interval, µs
-- Replies 1 when it undid the admission, 0 when the key no longer holds
-- what the admission wrote: a later admission stands on it (or the key
-- expired), and undoing it could then give back more than it took.
-- Undone, the key is what it would be had the admission never happened:
-- the TAT before it, or nothing when that has passed.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local back = tonumber(ARGV[1]) - tonumber(ARGV[2])
if back <= now then
  redis.call('DEL', KEYS[1])
  return 1
end
redis.call('SET', KEYS[1], string.format('%.0f', back), 'PX', math.ceil((back - now) / 1000))
return 1
