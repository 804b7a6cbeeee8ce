-- The vote's epoch step for a server process's later votes: the record as
-- it stands, unless it is missing (a flush since) or ahead of the clock.
-- The scripts are paired (node.NewScriptAfter) so that a process runs this
-- only after it ran epoch_check.lua: Redis and Valkey keep no script across
-- a restart, so a restarted process checks at its first vote. That keeps
-- INFO, some 5-8 µs of server time with its parsing, off every vote but
-- the first of a process.
local function vote_epoch()
  local e = redis.call('GET', KEYS[5])
  local at = e and tonumber(string.match(e, '^(%d+) '))
  if not at or at > us then
    return epoch(KEYS[9])
  end
  return e
end
