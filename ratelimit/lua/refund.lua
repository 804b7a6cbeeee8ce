-- refund: undo an admission a quorum refused, exactly, or not at all.
-- load, replay and save, in log.lua: the key's state.
--   KEYS     the limit's keys (log.lua)
--   ARGV[1]  the admission's id, "T.SEQ" (gcra.lua's fifth reply)
--   ARGV[2]  how long gcra.lua keeps admissions refundable, µs
-- Replies 1 when it undid the admission, 0 when the key no longer logs it
-- (folded, or the key expired or was lost): then it is not undone.
-- Undone, the key holds what it would had the admission never come: TAT
-- is replayed from the entries without it, whatever came after it, so it
-- gives back what the admission took and never more (see the package doc
-- for why this cannot admit past the bound).
local at, s = string.match(ARGV[1], '^(%d+)%.(%d+)$')
local tat, base, seq, es = load(KEYS)
if not tat or not at then
  return 0
end
at, s = tonumber(at), tonumber(s)
local rest, found = {}, false
for i = 1, #es do
  local e = es[i]
  if not found and e[1] == s and e[2] == at and e[4] == 0 then
    found = true
  else
    rest[#rest + 1] = e
  end
end
if not found then
  return 0
end
save(KEYS, replay(base, rest), base, seq, rest, tonumber(ARGV[2]))
return 1
