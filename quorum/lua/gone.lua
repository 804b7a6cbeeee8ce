-- gone(id, ms): whether id (an owner) is recorded in the gone set KEYS[2]
-- (see release.lua) until after ms.
local function gone(id, ms)
  local u = redis.call('ZSCORE', KEYS[2], id)
  return u and tonumber(u) > ms
end
