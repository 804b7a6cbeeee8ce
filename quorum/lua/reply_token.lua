-- reply: phase 1's answer with tokens: {status, pttl, now µs, epoch record,
-- counter, high, repaired}. The node's effective fence counter for the key
-- is max(counter KEYS[6], the node's floor KEYS[7]); its high-water mark is
-- KEYS[8], the epoch record it was repaired for KEYS[9]: all read in the
-- same script as the lock and the epoch, so a flush cannot fall between.
--
-- g, when given, is the token a grant committed for the lock this vote
-- took over, and still the effective counter (vote.lua): it follows as an
-- eighth value.
local function reply(st, p, e, g)
  local c = tonumber(redis.call('GET', KEYS[6]) or '0')
  local f = tonumber(redis.call('GET', KEYS[7]) or '0')
  if f > c then c = f end
  local r = {st, p, us, e, c, redis.call('GET', KEYS[8]) or '0', redis.call('GET', KEYS[9]) or ''}
  if g then r[8] = c end
  return r
end
