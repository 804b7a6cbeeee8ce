-- add: put items in the queue, at its back, in the order given.
--
-- KEYS[1]  the queue's items hash (see queue.lua)
-- ARGV     the item ids
--
-- An id already pending or claimed, or completed less than the done
-- record's lifetime ago (its :done:<id> key lives), is left as it is: a
-- client that sends the same add twice adds each item once. Publishes on
-- :ready when it added any. Replies how many it added.
local pending = KEYS[1] .. ':pending'
local score
local added = 0
for _, id in ipairs(ARGV) do
  if redis.call('HEXISTS', KEYS[1], id) == 0 and redis.call('EXISTS', KEYS[1] .. ':done:' .. id) == 0 then
    if not score then score = tail(us) end
    if redis.call('ZADD', pending, 'NX', fmt(score), id) == 1 then
      added = added + 1
      score = score + 1
    end
  end
end
if added > 0 then redis.call('PUBLISH', KEYS[1] .. ':ready', added) end
return added
