-- charge: count on this node a request the quorum admitted though this
-- node refused it, so that every node counts every admission and the
-- nodes' states stay alike.
--   KEYS[1]  the limit's key
--   ARGV[1]  what the admission took: n × the interval, µs
--   ARGV[2]  the tolerance, µs: Burst × the interval
-- Replies 1. The charge only ever moves TAT later, never past an empty
-- limit (now + the tolerance): it can make the node refuse more, never
-- admit more.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if tat < now then
  tat = now
end
local new = math.min(tat + tonumber(ARGV[1]), now + tonumber(ARGV[2]))
if new <= now then
  return 1
end
redis.call('SET', KEYS[1], string.format('%.0f', new), 'PX', math.ceil((new - now) / 1000))
return 1
