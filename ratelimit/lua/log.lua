-- log: the state of a limit, shared by gcra.lua, refund.lua and charge.lua
-- (each holds the functions it calls), in two keys of the same hash tag:
--   KEYS[1]  TAT, the theoretical arrival time, µs of the server's clock,
--            one number, as every version of the scripts reads it
--   KEYS[2]  the log, for the refunds of a quorum: "TAT BASE SEQ" and then
--            the latest admissions and charges, oldest first, each
--            "SEQ:T:C:CAP": its number in the limit's life, its time, what
--            it added (n × the interval, µs), and for a charge its cap (now
--            + the tolerance then), 0 for an admission
-- TAT is replay(BASE, entries): each entry's step applied in turn, an
-- admission's max(T, t) + c, a charge's max(T, min(max(T, t) + c, cap)).
-- A log whose TAT is not KEYS[1]'s was overtaken by a script that keeps
-- none (an earlier version): it is dropped, and its refunds are not made.
-- An admission's id, for its refund, is "T.SEQ". A Limiter on one node
-- keeps no log: it never refunds.
local function load(keys)
  local v = redis.call('GET', keys[1])
  local tat = tonumber(v or '')
  local l = redis.call('GET', keys[2])
  if not l then
    return tat, tat, 0, {}
  end
  local f = {}
  for w in string.gmatch(l, '%S+') do
    f[#f + 1] = w
  end
  local seq = tonumber(f[3] or '') or 0
  if not tat or f[1] ~= v then
    return tat, tat, seq, {}
  end
  local es = {}
  for i = 4, #f do
    local s, t, c, cap = string.match(f[i], '^(%d+):(%d+):(%d+):(%d+)$')
    if not s then
      return tat, tat, seq, {}
    end
    es[#es + 1] = {tonumber(s), tonumber(t), tonumber(c), tonumber(cap)}
  end
  return tat, tonumber(f[2]) or tat, seq, es
end

local function step(T, e)
  local v = math.max(T, e[2]) + e[3]
  if e[4] > 0 then
    v = math.max(T, math.min(v, e[4]))
  end
  return v
end

local function replay(base, es)
  local T = base
  for i = 1, #es do
    T = step(T, es[i])
  end
  return T
end

-- save writes the state, both keys expiring when TAT passes, or deletes
-- them when TAT has passed (by us, the server's clock in µs). With
-- refundable > 0 the log keeps the entries of the last refundable µs, at
-- most 32, folding the older ones into BASE; with refundable 0 there is
-- no log.
local function save(keys, tat, base, seq, es, refundable)
  if tat <= us then
    redis.call('DEL', keys[1], keys[2])
    return
  end
  local px = math.ceil((tat - us) / 1000)
  local written = fmt(tat)
  redis.call('SET', keys[1], written, 'PX', px)
  local i = 1
  while i <= #es and (refundable <= 0 or es[i][2] < us - refundable or #es - i >= 32) do
    base = step(base, es[i])
    i = i + 1
  end
  if i > #es then
    redis.call('DEL', keys[2])
    return
  end
  local parts = {written, fmt(base), fmt(seq)}
  for j = i, #es do
    local e = es[j]
    parts[#parts + 1] = string.format('%.0f:%.0f:%.0f:%.0f', e[1], e[2], e[3], e[4])
  end
  redis.call('SET', keys[2], table.concat(parts, ' '), 'PX', px)
end

