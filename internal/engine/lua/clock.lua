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

-- first_left(z): ms from now until the lowest score of the sorted set z
-- (server ms: the end of the first lease of those it holds), at least 0;
-- 0 when z is empty.
local function first_left(z)
  local first = redis.call('ZRANGE', z, 0, 0, 'WITHSCORES')
  if not first[2] then return 0 end
  return math.max(0, tonumber(first[2]) - now)
end
