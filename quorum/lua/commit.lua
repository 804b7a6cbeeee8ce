-- commit: phase 2, the token on one voter.
--
-- KEYS  lock, fence counter, floor, high-water mark
-- ARGV  owner, token, the counter's lifetime ms (the TTL plus the idle TTL;
--       '0': for ever)
--
-- Sets counter = token only while the owner holds the lock and both the
-- counter and the node's floor are lower; the high-water mark rises to it.
-- Replies 1 when committed, 0 when not the owner, -1 when the effective
-- counter is not lower. A commit run again by the owner that made it finds
-- the counter at its token while it holds the lock, which no other commit
-- could have set meanwhile, and replies 1 (counter.lua).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if commit_counter(KEYS[2], KEYS[3], KEYS[4], ARGV[2], ARGV[3]) == -1 then return -1 end
return 1
