-- release_all: give up the locks of a set (claim_all.lua), key by key.
--
-- KEYS     the locks' hashes
-- ARGV[1]  owner
-- ARGV[2…] each key's token, in KEYS' order
--
-- Each key still this owner's under its token is freed, handed to its
-- first live waiter as release.lua does (handoff.lua). A key already freed
-- under that token (the release run again) counts as released. Replies 1
-- when every lease was still running, 0 when some had run out (freed all
-- the same), or the error DLSTALE <attempts> when a key is held under
-- another token (the highest such attempts), the others freed regardless.
for i = 1, #KEYS do
  K = KEYS[i]
  enrich(0)
end
local reply, high = 1, nil
for i = 1, #KEYS do
  K = KEYS[i]
  local tok = ARGV[i + 1]
  local r = redis.call('HMGET', K, 'owner', 'attempts', 'until', 'waiting', 'exp', 'freed')
  if r[1] ~= ARGV[1] or r[2] ~= tok then
    if not (not r[1] and r[2] == tok or r[6] == tok) then
      local a = tonumber(r[2] or '0')
      if not high or a > high then high = a end
    end
  else
    free(r[2], r[5], r[4])
    if tonumber(r[3]) <= now then reply = 0 end
  end
end
if high then return stale(fmt(high)) end
return reply
