-- extend: keep a permit running for its holder.
--
-- KEYS[1]  the name's hash (see state.lua)
-- ARGV[1]  owner
-- ARGV[2]  token
-- ARGV[3]  slot
-- ARGV[4]  TTL, ms
-- ARGV[5]  the hash's lifetime, ms ('0': for ever)
--
-- Replies 1, or the error DLSTALE <the token last granted for the slot>
-- unless the owner holds that permit, with that token, still live: an
-- ended permit is never revived.
local v = redis.call('HGET', S, ARGV[1])
local u = redis.call('ZSCORE', H, ARGV[1])
if v ~= ARGV[2] .. ' ' .. ARGV[3] or not u or tonumber(u) <= now then
  return stale(redis.call('HGET', P, 's' .. ARGV[3]) or '0')
end
local ms = tonumber(ARGV[4])
redis.call('ZADD', H, fmt(now + ms), ARGV[1])
stretch(ms, H, S, SLOTS)
exp = kept(exp, ARGV[5])
return 1
