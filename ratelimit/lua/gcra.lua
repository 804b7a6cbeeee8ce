-- gcra: one call on one rate limit, by the generic cell rate algorithm,
-- judged by the server's clock alone (TIME, read once). log.lua comes
-- first: the key's state.
--   KEYS     the limit's keys (log.lua): its TAT, and the log of a quorum;
--            no TAT means "at or before now", and the keys expire exactly
--            then, so a limit at rest keeps nothing
--   ARGV[1]  the emission interval, µs: Per / Rate, rounded up
--   ARGV[2]  the tolerance, µs: Burst × the interval
--   ARGV[3]  n, the requests the call asks for, 1 ≤ n ≤ Burst
--   ARGV[4]  how long to keep the admission refundable, µs; 0 for no log
-- Replies {1 admitted or 0 refused, requests left, µs until n would be
-- admitted (0 when admitted), µs until the limit is full again, and for an
-- admission its id "T.SEQ", which refund.lua takes}.
-- A refusal writes nothing. Lua numbers are doubles, exact below 2^53:
-- µs since 1970 are ~2^51, and the tolerance is at most a year (~2^45).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local keep = tonumber(ARGV[4])

local tat, base, seq, es = load(KEYS)
if not tat or tat < now then
  -- At rest: nothing before now matters, and no refund can lower TAT
  -- below now; an earlier log is dropped.
  tat, base, seq, es = now, now, seq, {}
end
local new = tat + n * interval
local at = new - tolerance
if at > now then
  return {0, math.max(0, math.floor((now + tolerance - tat) / interval)), at - now, tat - now}
end
seq = seq + 1
es[#es + 1] = {seq, now, n * interval, 0}
save(KEYS, new, base, seq, es, now, keep)
return {1, math.floor((now + tolerance - new) / interval), 0, new - now, string.format('%.0f.%.0f', now, seq)}
