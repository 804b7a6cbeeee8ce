-- lean: the step from the lean form of a lock (see fast_claim.lua) to the
-- hash of claim.lua, in the scripts that need the hash: a waiter that
-- queues, an abandon that records a gone owner, and the scripts of a set
-- of keys.

-- lean(v): the token and the owner of v, a lock in the lean form held
-- ('token owner'); nil for a free one ('token').
local function lean(v) return string.match(v, '^(%d+) (.+)$') end

-- enrich(life, v): K as the hash. A string ('token owner', held, or
-- 'token', free) becomes the hash of the same attempts, owner and until
-- (now + its PTTL), expiring when the string would have and not before
-- life ms from now ('0': kept for ever, as a string without expiry is). v
-- is K's value as GET under pcall read it, or nil to read it here; a hash
-- (the GET's error reply) or no key (false) is left as it is.
local function enrich(life, v)
  if v == nil then v = redis.pcall('GET', K) end
  if type(v) ~= 'string' then return end
  local a, own = lean(v)
  local p = redis.call('PTTL', K)
  redis.call('DEL', K)
  if own then
    redis.call('HSET', K, 'attempts', a, 'owner', own, 'until', fmt(now + math.max(p, 0)))
  else
    redis.call('HSET', K, 'attempts', v)
  end
  if life == '0' or p < 0 then
    redis.call('HSET', K, 'exp', 'inf')
    return
  end
  local ms = math.max(p, tonumber(life))
  redis.call('HSET', K, 'exp', fmt(now + ms))
  redis.call('PEXPIRE', K, ms)
end
