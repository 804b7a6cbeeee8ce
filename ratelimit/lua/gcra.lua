-- gcra: one call on one rate limit, by the generic cell rate algorithm,
-- judged by the server's clock alone (TIME, read once).
--   KEYS[1]  the limit's key: its theoretical arrival time (TAT), µs of the
--            server's clock; absent means "at or before now", and the key
--            expires exactly then, so a limit at rest keeps nothing
--   ARGV[1]  the emission interval, µs: Per / Rate, rounded up
--   ARGV[2]  the tolerance, µs: Burst × the interval
--   ARGV[3]  n, the requests the call asks for, 1 ≤ n ≤ Burst
-- Replies {1 admitted or 0 refused, requests left, µs until n would be
-- admitted (0 when admitted), µs until the limit is full again, and for an
-- admission the TAT it wrote, the value refund.lua compares}.
-- A refusal writes nothing. Lua numbers are doubles, exact below 2^53:
-- µs since 1970 are ~2^51, and the tolerance is at most a year (~2^45).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local n = tonumber(ARGV[3])

local tat = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if tat < now then
  tat = now
end
local new = tat + n * interval
local at = new - tolerance
if at > now then
  return {0, math.max(0, math.floor((now + tolerance - tat) / interval)), at - now, tat - now}
end
local written = string.format('%.0f', new)
redis.call('SET', KEYS[1], written, 'PX', math.ceil((new - now) / 1000))
return {1, math.floor((now + tolerance - new) / interval), 0, new - now, written}
