-- fast_extend: the head of extend.lua, run before the clock is read: a
-- lease in the lean form (see fast_claim.lua) runs a TTL from now when it
-- is still the owner's, with its token; else DLSTALE with the key's token
-- (0 when the lease ran out and the server dropped the key). A hash goes
-- on to extend.lua.
local v = redis.pcall('GET', KEYS[1])
if type(v) ~= 'table' then
  if v == ARGV[2] .. ' ' .. ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[4])
    return 1
  end
  return stale(v and string.match(v, '^%d+') or '0')
end
