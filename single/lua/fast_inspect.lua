-- fast_inspect: the head of inspect.lua for a lock in the lean form (see
-- fast_claim.lua): its owner and token, and the lease's PTTL.
local v = redis.pcall('GET', KEYS[1])
if type(v) ~= 'table' then
  if not v then return {'', '0', 0} end
  local a, own = lean(v)
  if not a then return {'', v, 0} end
  return {own, a, redis.call('PTTL', KEYS[1])}
end
