-- put: write a value under a token unless a larger token wrote first.
--
-- KEYS[1]  the register's hash: v (the value), t (the token it was written
--          under; absent before the first write)
-- ARGV[1]  the value
-- ARGV[2]  the token, decimal
--
-- Replies 1 after the write. Replies the error DLSTALE <highest token> and
-- writes nothing when ARGV[2] is below the stored token, or is 0 (no lease
-- hands out 0). Equal tokens write: the same holder may write again.
-- Tokens compare as Lua numbers, exact up to 2^53.
local h = tonumber(redis.call('HGET', KEYS[1], 't') or '0')
local t = tonumber(ARGV[2])
if t < h or t == 0 then
  return stale(fmt(h))
end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 't', ARGV[2])
return 1
