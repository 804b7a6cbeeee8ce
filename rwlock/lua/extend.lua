-- extend: keep a writer's or a reader's lease running.
--
-- KEYS[1]  the lock's hash (see state.lua)
-- ARGV[1]  owner
-- ARGV[2]  'w' for a writer, 'r' for a reader
-- ARGV[3]  token
-- ARGV[4]  TTL, ms
-- ARGV[5]  the hash's lifetime, ms ('0': for ever)
--
-- Replies 1, or the error DLSTALE <attempts> unless the owner holds the
-- lock, of its kind, with that token, and its lease is still live: an
-- ended lease is never revived.
local ms = tonumber(ARGV[4])
if fmt(attempts) ~= ARGV[3] then return stale(fmt(attempts)) end
if ARGV[2] == 'w' then
  if writer ~= ARGV[1] then return stale(fmt(attempts)) end
  redis.call('HSET', P, 'until', fmt(now + ms))
else
  local u = redis.call('ZSCORE', R, ARGV[1])
  if not u or tonumber(u) <= now then return stale(fmt(attempts)) end
  redis.call('ZADD', R, fmt(now + ms), ARGV[1])
  stretch(ms, R)
end
exp = kept(exp, ARGV[5])
return 1
