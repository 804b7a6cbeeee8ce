package redlock

import "github.com/dlockgo/dlock/node"

// Tokens and counters are compared as Lua numbers (exact below 2^53) but
// always stored from the caller's decimal string: Lua would write a large
// number in exponent form.

// Status of an acquire script's reply.
const (
	statusHeld   = 0 // held by another owner
	statusSet    = 1 // set for the caller's owner
	statusQueued = 2 // free, but promised to an earlier waiter
	statusGone   = 3 // the caller's owner was given up: a late vote, refused
)

// queueHead is the Lua function that returns the waiter at the head of the
// queue KEYS[3] (scores: first-attempt times), dropping the heads whose
// deadline in KEYS[4] is not after ms, or false when none is left.
const queueHead = `
local function head(ms)
  while true do
    local h = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
    if not h then return false end
    if tonumber(redis.call('HGET', KEYS[4], h) or '0') > ms then return h end
    redis.call('ZREM', KEYS[3], h)
    redis.call('HDEL', KEYS[4], h)
  end
end
`

// goneCheck is the Lua function that reports whether id (an owner) is
// recorded in the gone set KEYS[2] (see remember) until after ms.
const goneCheck = `
local function gone(id, ms)
  local u = redis.call('ZSCORE', KEYS[2], id)
  return u and tonumber(u) > ms
end
`

// epochOf is the Lua function that returns the node's epoch record (KEYS[5])
// as "µs run_id": when the node last lost, or may have lost, its data, by
// its own clock, and the server process (INFO's run_id) that stamped it.
// now is the node's clock in µs; rk is the repair mark's key (nil without
// tokens). The record is stamped anew
//
//   - with now, when it is missing: a node never used, or one that lost
//     every key (a restart without persistence, a flush), at most now;
//   - with the start of the running process, when another process stamped
//     it: a restart that brought its data back from an RDB snapshot or an
//     AOF whose last writes were not synced (appendfsync everysec), and so
//     lost every write after them, at its restart. INFO gives the uptime
//     in whole seconds of the wall clock the process reads, so the start
//     is taken as late as it can be, and never after now;
//   - when it lies ahead of now, the clock having stepped back since the
//     stamp (a host that booted with its clock ahead, corrected by NTP):
//     waiting for the old stamp would sit the node out for the size of the
//     step. A node repaired for the record had sat out and lost nothing
//     since: its record becomes "0 run_id", repaired as well, and it goes
//     on voting. Any other is stamped with now.
//
// A new stamp makes the node sit out from it (see Locker.sitOut) and then
// be repaired (see repairs), the repair mark no longer matching the record.
// A server that will not run INFO from a script (an ACL without
// @dangerous, an in-process server without run_id) is told so in an error
// reply, which the vote passes on: it cannot tell a restart apart.
const epochOf = `
local function epoch(now, rk)
  local ok, info = pcall(redis.call, 'INFO', 'server')
  local run = ok and string.match(info, 'run_id:(%x+)')
  if not run then
    return redis.error_reply('DLINFO the lost-data guard reads INFO server from its script, which this server refused: allow INFO to the user, or declare the nodes durable')
  end
  local e = redis.call('GET', KEYS[5])
  local at, by
  if e then at, by = string.match(e, '^(%d+) (%x+)$') end
  if e and by == run and tonumber(at) <= now then return e end
  local stamp = now
  if e and by ~= run then
    local up = tonumber(string.match(info, 'uptime_in_seconds:(%-?%d+)'))
    local sec = math.floor((tonumber(string.match(info, 'server_time_usec:(%d+)')) or now) / 1000000)
    stamp = math.min(now, (sec - up + 1) * 1000000)
  elseif e and rk and redis.call('GET', rk) == e then
    e = '0 ' .. run
    redis.call('SET', KEYS[5], e)
    redis.call('SET', rk, e)
    return e
  end
  e = string.format('%.0f', stamp) .. ' ' .. run
  redis.call('SET', KEYS[5], e)
  return e
end
`

// acquireBody returns phase 1 on one node, shared by every acquire script,
// with epoch the Lua that sets the local e (see below). KEYS: lock, gone,
// queue, queue deadlines, epoch. ARGV: owner, TTL ms, waiter (empty for
// none), waiter's score, waiter's ticket life ms.
//
// It reads the node's clock and, with the guard on, its epoch record (see
// epochOf), then grants the lock to the owner when it is free, the owner
// was not given up (see releaseScript), and the queue is empty or its head
// is this waiter. A vote run again by the owner that made it (a client
// that re-sent it after its reply was lost) finds the lock its own, and is
// the vote it made. A waiter granted keeps its ticket, at the head, until
// its lease is released (see releaseScript): taking it off on a grant left
// the nodes with different heads whenever the attempt failed overall. A
// waiter refused joins the queue (or stays, keeping its first score) and
// its ticket's deadline moves to now + its life; the queue's keys expire
// with their latest ticket. A vote of an owner given up is refused and
// does not queue its waiter: it is a late one. Every node orders waiters by
// the same scores, so the head is the same waiter on every node that holds
// the same tickets.
//
// Locals left for the script's tail: st (a status above), p (the holder's
// PTTL, or 0), now (µs, as a number) and e (the epoch record; empty with
// the guard off).
func acquireBody(epoch string) string {
	return queueHead + goneCheck + epochOf + `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
` + epoch + `
local ms = math.floor(now / 1000)
local st, p = 0, redis.call('PTTL', KEYS[1])
if p == -2 then
  p = 0
  local h = head(ms)
  if h and h ~= ARGV[3] then
    st = 2
  elseif gone(ARGV[1], ms) then
    return {3, 0, now, e}
  else
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
    st = 1
  end
elseif redis.call('GET', KEYS[1]) == ARGV[1] then
  p, st = 0, 1
end
if st ~= 1 and ARGV[3] ~= '' then
  if gone(ARGV[1], ms) then return {3, 0, now, e} end
  redis.call('ZADD', KEYS[3], 'NX', ARGV[4], ARGV[3])
  redis.call('HSET', KEYS[4], ARGV[3], ms + tonumber(ARGV[5]))
  if redis.call('PTTL', KEYS[3]) < tonumber(ARGV[5]) then
    redis.call('PEXPIRE', KEYS[3], ARGV[5])
    redis.call('PEXPIRE', KEYS[4], ARGV[5])
  end
end
`
}

// The epoch steps of acquireBody. Without the guard the record is neither
// read nor stamped. With it, a server process checks its record (INFO and
// all, see epochOf) at its first vote, which the scripts' NewScriptAfter
// pairing guarantees: Redis and Valkey keep no script across a restart,
// so a process whose cache holds the trusting script has run the checking
// one. Later votes take the record as it stands, unless it is missing (a
// flush since) or ahead of the clock. That keeps INFO, some 5-8 µs of
// server time with its parsing, off every vote but the first of a process.
// The check refuses Redis before 7.0, which persisted and replicated its
// script cache.
const (
	epochOff   = "local e = ''\n"
	epochCheck = `if (redis.REDIS_VERSION_NUM or 0) < 0x070000 then
  return redis.error_reply('DLVERSION the lost-data guard needs Redis 7.0 or later (or Valkey), which keep no script across a restart: upgrade, or declare the nodes durable')
end
local e = epoch(now, KEYS[9])
if type(e) == 'table' then return e end
`
	epochTrust = `local e = redis.call('GET', KEYS[5])
local at = e and tonumber(string.match(e, '^(%d+) '))
if not at or at > now then
  e = epoch(now, KEYS[9])
  if type(e) == 'table' then return e end
end
`
)

// acquireTail ends a phase 1 script without tokens. Reply: {status, pttl,
// now µs, epoch record}.
const acquireTail = `
return {st, p, now, e}
`

// acquireTokenTail ends a phase 1 script with tokens: it adds the node's
// effective fence counter for the key, max(counter KEYS[6], node floor
// KEYS[7]), its high-water mark (KEYS[8]) and the epoch record it was
// repaired for (KEYS[9]), read in the same script as the lock and the
// epoch, so a flush cannot fall between them. Reply: {status, pttl, now
// µs, epoch record, counter, high, repaired}.
const acquireTokenTail = `
local c = tonumber(redis.call('GET', KEYS[6]) or '0')
local f = tonumber(redis.call('GET', KEYS[7]) or '0')
if f > c then c = f end
return {st, p, now, e, c, redis.call('GET', KEYS[8]) or '0', redis.call('GET', KEYS[9]) or ''}
`

// The phase 1 scripts, by whether tokens and the guard are on.
var (
	acquireScript      = node.NewScript(acquireBody(epochOff) + acquireTail)
	acquireTokenScript = node.NewScript(acquireBody(epochOff) + acquireTokenTail)

	acquireGuardedScript = node.NewScriptAfter(
		node.NewScript(acquireBody(epochCheck)+acquireTail),
		acquireBody(epochTrust)+acquireTail)
	acquireTokenGuardedScript = node.NewScriptAfter(
		node.NewScript(acquireBody(epochCheck)+acquireTokenTail),
		acquireBody(epochTrust)+acquireTokenTail)
)

// acquireScriptFor returns the phase 1 script of a Locker with or without
// tokens and the guard.
func acquireScriptFor(tokens, guard bool) *node.Script {
	switch {
	case tokens && guard:
		return acquireTokenGuardedScript
	case tokens:
		return acquireTokenScript
	case guard:
		return acquireGuardedScript
	}
	return acquireScript
}

// commitScript is phase 2: counter (KEYS[2]) = ARGV[2] only while the owner
// ARGV[1] holds the lock (KEYS[1]) and both the counter and the node's
// floor (KEYS[3]) are lower; the node's high-water mark (KEYS[4]) rises to
// it. The counter expires ARGV[3] ms later (the TTL plus the idle TTL),
// unless ARGV[3] is '0', which keeps it for ever. Reply 1 when committed,
// 0 when not owner, -1 when the effective counter is not lower. A commit
// run again by the owner that made it (see acquireBody) finds the counter
// at its token while it holds the lock, which no other commit could have
// set meanwhile, and replies 1.
var commitScript = node.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local t = tonumber(ARGV[2])
local c = tonumber(redis.call('GET', KEYS[2]) or '0')
if c == t then return 1 end
if c > t then return -1 end
if tonumber(redis.call('GET', KEYS[3]) or '0') >= t then return -1 end
if ARGV[3] == '0' then
  redis.call('SET', KEYS[2], ARGV[2])
else
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
end
if t > tonumber(redis.call('GET', KEYS[4]) or '0') then redis.call('SET', KEYS[4], ARGV[2]) end
return 1
`)

// repairScript repairs a node that lost its data, if its epoch record
// (KEYS[1]) is still ARGV[1]: floor (KEYS[2]) = max(floor, ARGV[2]), high
// (KEYS[3]) = max(high, floor), and the repair mark (KEYS[4]) = the
// record. Reply 1 when repaired, 0 when the record changed (the node lost
// its data again).
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

// extendScript sets the lock's expiry (KEYS[1]) to ARGV[2] ms when the
// owner ARGV[1] holds it; a lock that expired stays expired. With tokens,
// the fence counter (KEYS[2]) is kept ARGV[3] ms more (unless '0', for
// ever), so that it outlives the lease by the idle TTL. Reply 1 or 0.
var extendScript = node.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  if KEYS[2] and ARGV[3] ~= '0' then redis.call('PEXPIRE', KEYS[2], ARGV[3]) end
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`)

// remember is the Lua function that records id (an owner) in the gone set
// KEYS[2] for ARGV[3] ms: a sorted set scored by the node's time (ms)
// until which each record holds. Records that lapsed are dropped whenever
// one is added, and the key expires with its last record, so the set
// holds no more than the owners given up within the last ARGV[3] ms.
const remember = `
local function remember(id)
  local t = redis.call('TIME')
  local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ms)
  redis.call('ZADD', KEYS[2], ms + tonumber(ARGV[3]), id)
  if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[3]) then
    redis.call('PEXPIRE', KEYS[2], ARGV[3])
  end
end
`

// releaseScript: KEYS lock, gone, queue, queue deadlines, fence counter;
// ARGV owner, channel (empty for no message), ms to remember the owner as
// given up ('0' not to), the waiter the lease was granted to (empty for
// none), the lease's token (empty for none). The waiter's ticket is taken
// off the queue. It deletes the lock when the owner holds it and
// publishes on the channel. Otherwise, where the owner's vote may still be
// on its way (its call timed out or broke, and a stopped server runs it
// when it resumes: the caller knows, and passes a time to remember), the
// owner is recorded in the gone set, which the acquire scripts check, so
// the late vote is refused instead of holding the lock for a TTL. Where
// the owner holds the lock, or its call was answered, its vote has
// already run, and there is nothing to record. Reply 1 when deleted; 1 too when the lock is gone and the fence
// counter is still at the lease's token (nobody has taken the lock since:
// this release run again after its reply was lost, or a lock that expired
// untouched); else 0.
var releaseScript = node.NewScript(remember + `
if ARGV[4] ~= '' then
  redis.call('ZREM', KEYS[3], ARGV[4])
  redis.call('HDEL', KEYS[4], ARGV[4])
end
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if ARGV[2] ~= '' then redis.call('PUBLISH', ARGV[2], '1') end
  return 1
end
if ARGV[3] ~= '0' then remember(ARGV[1]) end
if not v and ARGV[5] ~= '' and redis.call('GET', KEYS[5]) == ARGV[5] then return 1 end
return 0
`)

// leaveScript: KEYS lock, gone, queue, queue deadlines; ARGV waiter,
// channel. A waiter that gives up leaves the queue; when the lock is
// free, waiters are woken, since the next one may be waiting for this
// one. (A vote of its still on the way is refused: its attempt's release
// recorded its owner as gone.) Reply 1.
var leaveScript = node.NewScript(`
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('PUBLISH', ARGV[2], '1') end
return 1
`)
