-- charge: count on this node a request the quorum admitted though this
-- node refused it, so that every node counts every admission and the
-- nodes' states stay alike. load, step and save, in log.lua: the key's
-- state.
--   KEYS     the limit's keys (log.lua)
--   ARGV[1]  what the admission took: n × the interval, µs
--   ARGV[2]  the tolerance, µs: Burst × the interval
--   ARGV[3]  how long gcra.lua keeps admissions refundable, µs
-- Replies 1. The charge only ever moves TAT later, never past an empty
-- limit (now + the tolerance): it can make the node refuse more, never
-- admit more. It is logged, so that a refund replays it.
local tat, base, seq, es = load(KEYS)
if not tat or tat < us then
  tat, base, es = us, us, {}
end
local e = {seq + 1, us, tonumber(ARGV[1]), us + tonumber(ARGV[2])}
local new = step(tat, e)
if new <= tat then
  return 1
end
es[#es + 1] = e
save(KEYS, new, base, seq + 1, es, tonumber(ARGV[3]))
return 1
