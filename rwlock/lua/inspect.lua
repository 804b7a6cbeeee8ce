-- inspect: who holds the lock, as the server sees it now. Changes nothing.
--
-- KEYS[1]  the lock's hash (see state.lua)
--
-- Replies {attempts, the live writer's owner or '', its ms left, live
-- readers, the owner of the reader whose lease ends last or '', its ms
-- left}.
local n = redis.call('ZCOUNT', R, '(' .. fmt(now), '+inf')
local last = redis.call('ZRANGE', R, -1, -1, 'WITHSCORES')
local rown, rleft = '', 0
if n > 0 and last[2] then rown, rleft = last[1], tonumber(last[2]) - now end
local wleft = 0
if writer then wleft = wuntil - now end
return {fmt(attempts), writer or '', wleft, n, rown, rleft}
