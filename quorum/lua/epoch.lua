-- judge(e, info, rk) and epoch(rk): the node's epoch record (KEYS[5] for
-- a vote), "µs run_id": when the node last lost, or may have lost, its
-- data, by its own clock (us, the library's clock in µs), and the server
-- process (INFO's run_id) that stamped it. rk is the repair mark's key
-- (nil without tokens). The record is stamped anew
--
--   * with us, when it is missing: a node never used, or one that lost
--     every key (a restart without persistence, a flush), at most now;
--   * with the start of the running process, when another process stamped
--     it: a restart that brought its data back from an RDB snapshot or an
--     AOF whose last writes were not synced (appendfsync everysec), and so
--     lost every write after them, at its restart. INFO gives the uptime in
--     whole seconds of the wall clock the process reads, so the start is
--     taken as late as it can be, and never after us;
--   * when it lies ahead of us, the clock having stepped back since the
--     stamp (a host that booted with its clock ahead, corrected by NTP):
--     waiting for the old stamp would sit the node out for the size of the
--     step. A node repaired for the record had sat out and lost nothing
--     since: its record becomes "0 run_id", repaired as well, and it goes
--     on voting. Any other is stamped with us.
--
-- A new stamp makes the node sit out from it and then be repaired, the
-- repair mark no longer matching the record. A server that will not run
-- INFO from a script (an ACL without @dangerous, an in-process server
-- without run_id) is told so in an error reply, which the vote passes on:
-- it cannot tell a restart apart. judge decides, writing nothing, so that
-- inspect.lua reads what a vote would: given the record e as stored and
-- INFO's text, it returns the record to keep, whether it is new (to be
-- written), and whether the repair mark moves with it (a step back on a
-- repaired node); nil when INFO has no run_id. epoch writes what judge
-- decided, and returns the record, or the error.
local function judge(e, info, rk)
  local run = info and string.match(info, 'run_id:(%x+)')
  if not run then return nil end
  local at, by
  if e then at, by = string.match(e, '^(%d+) (%x+)$') end
  if e and by == run and tonumber(at) <= us then return e, false end
  local stamp = us
  if e and by ~= run then
    local up = tonumber(string.match(info, 'uptime_in_seconds:(%-?%d+)'))
    local sec = math.floor((tonumber(string.match(info, 'server_time_usec:(%d+)')) or us) / 1000000)
    stamp = math.min(us, (sec - up + 1) * 1000000)
  elseif e and rk and redis.call('GET', rk) == e then
    return '0 ' .. run, true, true
  end
  return fmt(stamp) .. ' ' .. run, true
end
local function epoch(rk)
  local ok, info = pcall(redis.call, 'INFO', 'server')
  local e = redis.call('GET', KEYS[5])
  local rec, new, mark = judge(e, ok and info, rk)
  if not rec then
    return redis.error_reply('DLINFO the lost-data guard reads INFO server from its script, which this server refused: allow INFO to the user, or declare the nodes durable')
  end
  if new then redis.call('SET', KEYS[5], rec) end
  if mark then redis.call('SET', rk, rec) end
  return rec
end
