package redlock

import "github.com/dlockgo/dlock/node"

// Tokens and counters are compared as Lua numbers (exact below 2^53) but
// always stored from the caller's decimal string: Lua would write a large
// number in exponent form.

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
// if free, and reads the node's effective fence counter for the key:
// max(key counter KEYS[2], node floor KEYS[3]), its high-water mark
// (KEYS[4]) and the epoch it was repaired for (KEYS[5]). Reading the
// repair mark in the same script as the lock makes a flush between this
// and the epoch script read as "not repaired". Reply: {1, counter, high,
// repaired, server time µs} when set, {0, counter, high, repaired, pttl}
// when held.
var acquireScript = node.NewScript(`
local ok = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
local c = tonumber(redis.call('GET', KEYS[2]) or '0')
local f = tonumber(redis.call('GET', KEYS[3]) or '0')
if f > c then c = f end
local h = redis.call('GET', KEYS[4]) or '0'
local r = redis.call('GET', KEYS[5]) or ''
if ok then
  local t = redis.call('TIME')
  return {1, c, h, r, tonumber(t[1]) * 1000000 + tonumber(t[2])}
end
return {0, c, h, r, redis.call('PTTL', KEYS[1])}
`)

// commitScript is phase 2: counter (KEYS[2]) = ARGV[2] only while the owner
// ARGV[1] holds the lock (KEYS[1]) and both the counter and the node's
// floor (KEYS[3]) are lower; the node's high-water mark (KEYS[4]) rises to
// it. Reply 1 when committed, 0 when not owner, -1 when the effective
// counter is not lower.
var commitScript = node.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local t = tonumber(ARGV[2])
if tonumber(redis.call('GET', KEYS[2]) or '0') >= t then return -1 end
if tonumber(redis.call('GET', KEYS[3]) or '0') >= t then return -1 end
redis.call('SET', KEYS[2], ARGV[2])
if t > tonumber(redis.call('GET', KEYS[4]) or '0') then redis.call('SET', KEYS[4], ARGV[2]) end
return 1
`)

// repairScript repairs a node that lost its data, if its epoch (KEYS[1])
// is still ARGV[1]: floor (KEYS[2]) = max(floor, ARGV[2]), high (KEYS[3])
// = max(high, floor), and the repair mark (KEYS[4]) = the epoch. Reply 1
// when repaired, 0 when the epoch changed (the node lost its data again).
var repairScript = node.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local f = redis.call('GET', KEYS[2]) or '0'
if tonumber(ARGV[2]) > tonumber(f) then
  f = ARGV[2]
  redis.call('SET', KEYS[2], f)
end
if tonumber(f) > tonumber(redis.call('GET', KEYS[3]) or '0') then redis.call('SET', KEYS[3], f) end
redis.call('SET', KEYS[4], ARGV[1])
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
