package redistest

// single's lock keeps its state in one of two forms (single/lua/
// fast_claim.lua): the lean string, 'token owner' while held (expiring
// with the lease) and 'token' once released, or the hash of claim.lua
// (owner, until, attempts, waiting, ...), which a key takes once a waiter
// queues or an owner is recorded as gone. Tests read and plant a lock's
// state through these, in either form.

// lockField reads a field of the lock at KEYS[1] in either form; the
// string form has owner, attempts and until (server ms: now + PTTL).
const lockField = `
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then return redis.call('HGET', KEYS[1], ARGV[1]) or '' end
if not v then return '' end
local a, own = string.match(v, '^(%d+) (.+)$')
if not a then a = v end
if ARGV[1] == 'attempts' then return a end
if ARGV[1] == 'owner' then return own or '' end
if ARGV[1] == 'until' and own then
  local t = redis.call('TIME')
  return tostring(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + redis.call('PTTL', KEYS[1]))
end
return ''
`

// lockHash turns the string form at KEYS[1] into the hash, as the
// scripts do (single/lua/lean.lua's enrich): same attempts, owner and
// until, the hash kept for a minute at least (as a claim's lifetime
// keeps it), so that what a test plants in it stays.
const lockHash = `
local v = redis.pcall('GET', KEYS[1])
if type(v) ~= 'string' then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local a, own = string.match(v, '^(%d+) (.+)$')
local p = redis.call('PTTL', KEYS[1])
redis.call('DEL', KEYS[1])
if own then
  redis.call('HSET', KEYS[1], 'attempts', a, 'owner', own, 'until', string.format('%.0f', now + math.max(p, 0)))
else
  redis.call('HSET', KEYS[1], 'attempts', v)
end
if p < 0 then
  redis.call('HSET', KEYS[1], 'exp', 'inf')
else
  local ms = math.max(p, 60000)
  redis.call('HSET', KEYS[1], 'exp', string.format('%.0f', now + ms))
  redis.call('PEXPIRE', KEYS[1], ms)
end
return 1
`

// LockField returns field (owner, attempts or until) of single's lock
// whose server key is hkey ("dlock:{name}"), in either of its forms: ""
// when there is no such lock or field.
func (s *Server) LockField(hkey, field string) (string, error) {
	return s.Do("EVAL", lockField, "1", hkey, field)
}

// LockHash turns single's lock whose server key is hkey into the hash
// form, as its scripts do before a waiter queues, so that a test can plant
// state in it with HSET; a lock already a hash, or none, is left as it is.
func (s *Server) LockHash(hkey string) error {
	_, err := s.Do("EVAL", lockHash, "1", hkey)
	return err
}

// lockSteal makes ARGV[1] the owner of the lock at KEYS[1], in either
// form, keeping its token and expiry: another owner taking over.
const lockSteal = `
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then return redis.call('HSET', KEYS[1], 'owner', ARGV[1]) end
local a = v and string.match(v, '^%d+') or '0'
redis.call('SET', KEYS[1], a .. ' ' .. ARGV[1], 'KEEPTTL')
return 1
`

// StealArgs is the command (for Do) by which owner takes over single's
// lock whose server key is hkey, in either of its forms, keeping the
// lock's token and expiry.
func StealArgs(hkey, owner string) []string {
	return []string{"EVAL", lockSteal, "1", hkey, owner}
}

// lockFree frees the lock at KEYS[1] behind its holder's back, keeping
// its counter, in either form: the next claim draws a token above the
// holder's.
const lockFree = `
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then return redis.call('HDEL', KEYS[1], 'owner', 'until') end
if not v then return 0 end
redis.call('SET', KEYS[1], string.match(v, '^%d+') or '0', 'KEEPTTL')
return 1
`

// FreeArgs is the command (for Do) that frees single's lock whose server
// key is hkey behind its holder's back, in either of its forms, keeping
// the lock's counter.
func FreeArgs(hkey string) []string {
	return []string{"EVAL", lockFree, "1", hkey}
}
