-- set_reply: the answer of a set's phase 1 with tokens: {status, pttl, now
-- µs, epoch record, counter, high, repaired, then the counter of each
-- other lock}: a single lock's seven values for the first lock, then one
-- value per lock after it. Each counter is the node's effective fence
-- counter for that lock, max(counter, the node's floor KEYS[7]); the
-- high-water mark is KEYS[8], the repair mark KEYS[9], all read in the
-- same script as the locks and the epoch. The keys of the set's second
-- lock start at KEYS[more] (see vote_set.lua).
local more = 10
local function set_reply(st, p, e, k)
  local f = tonumber(redis.call('GET', KEYS[7]) or '0')
  local function counter(key)
    local c = tonumber(redis.call('GET', key) or '0')
    if f > c then return f end
    return c
  end
  local r = {st, p, us, e, counter(KEYS[6]), redis.call('GET', KEYS[8]) or '0', redis.call('GET', KEYS[9]) or ''}
  for j = 2, k do
    r[#r + 1] = counter(KEYS[more + 5 * (j - 2) + 4])
  end
  return r
end
