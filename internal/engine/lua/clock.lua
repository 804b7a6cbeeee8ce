-- clock: the server's clock. A script that judges leases, tickets or
-- records reads it once, at its start (now, us), and judges every one by
-- it; no client clock is ever compared with it.

-- clock(): the server's clock (TIME), read at the call, in ms and in µs.
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- now, us: the server's clock at the script's start, in ms and in µs.
local now, us = clock()
