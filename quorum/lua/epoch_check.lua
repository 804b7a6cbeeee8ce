-- The vote's epoch step for a server process's first vote (see
-- epoch_trust.lua): the record checked against INFO, whatever it holds.
-- Redis before 7.0 kept scripts across restarts, so it is refused.
local function vote_epoch()
  if (redis.REDIS_VERSION_NUM or 0) < 0x070000 then
    return redis.error_reply('DLVERSION the lost-data guard needs Redis 7.0 or later (or Valkey), which keep no script across a restart: upgrade, or declare the nodes durable')
  end
  return epoch(KEYS[9])
end
