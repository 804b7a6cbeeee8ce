package redlock

import "github.com/dlockgo/dlock/node"

// epochScript returns {epoch, now}: the node's epoch and its clock, both in
// microseconds. A missing epoch is stamped with now, so it reads as a node
// that has just lost its data. The value is kept as the decimal string of
// TIME, exactly.
var epochScript = node.NewScript(`
local t = redis.call('TIME')
local now = t[1] .. string.format('%06d', tonumber(t[2]))
local e = redis.call('GET', KEYS[1])
if not e then
  redis.call('SET', KEYS[1], now)
  e = now
end
return {e, now}
`)

// acquireScript sets the lock (KEYS[1]) to the owner ARGV[1] for ARGV[2] ms
// if free, and reads the fence counter (KEYS[2]) and repair marker
// (KEYS[3]). Reply: {1, counter, marker, server time µs} when set,
// {0, counter, marker, pttl} when held.
var acquireScript = node.NewScript(`
local ok = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
local c = tonumber(redis.call('GET', KEYS[2]) or '0')
local m = redis.call('GET', KEYS[3]) or ''
if ok then
  local t = redis.call('TIME')
  return {1, c, m, tonumber(t[1]) * 1000000 + tonumber(t[2])}
end
return {0, c, m, redis.call('PTTL', KEYS[1])}
`)

// commitScript is phase 2: counter (KEYS[2]) = ARGV[2] only while the owner
// ARGV[1] holds the lock (KEYS[1]) and the counter is lower; then the repair
// marker (KEYS[3]) takes the node's epoch ARGV[3] unless that is empty.
// Reply 1 when committed, 0 when not owner, -1 when the counter is not lower.
var commitScript = node.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local c = tonumber(redis.call('GET', KEYS[2]) or '0')
if c >= tonumber(ARGV[2]) then return -1 end
redis.call('SET', KEYS[2], ARGV[2])
if ARGV[3] ~= '' then redis.call('SET', KEYS[3], ARGV[3]) end
return 1
`)

// extendScript sets the lock's expiry to ARGV[2] ms when the owner ARGV[1]
// holds it; a lock that expired stays expired. Reply 1 or 0.
var extendScript = node.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`)

// releaseScript deletes the lock when the owner ARGV[1] holds it, and then
// publishes on channel ARGV[2] unless it is empty. Reply 1 or 0.
var releaseScript = node.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if ARGV[2] ~= '' then redis.call('PUBLISH', ARGV[2], '1') end
  return 1
end
return 0
`)
