-- gcra: one call on one rate limit, by the generic cell rate algorithm,
-- judged by the server's clock alone (TIME, read once: us, in µs). load
-- and save, in log.lua: the key's state.
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
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local refundable = tonumber(ARGV[4])

local tat, base, seq, es = load(KEYS)
if not tat or tat < us then
  -- At rest: nothing before now matters, and no refund can lower TAT
  -- below now; an earlier log is dropped.
  tat, base, seq, es = us, us, seq, {}
end
local new = tat + n * interval
local at = new - tolerance
if at > us then
  return {0, math.max(0, math.floor((us + tolerance - tat) / interval)), at - us, tat - us}
end
seq = seq + 1
es[#es + 1] = {seq, us, n * interval, 0}
save(KEYS, new, base, seq, es, refundable)
return {1, math.floor((us + tolerance - new) / interval), 0, new - us, string.format('%.0f.%.0f', us, seq)}
