-- add: put items in the queue, at its back, in the order given.
--
-- KEYS[1]  the queue's items hash (see items.lua)
-- ARGV     the item ids
--
-- An id already pending or claimed, or completed less than the done
-- record's lifetime ago (its :done:<id> key lives), is left as it is: a
-- client that sends the same add twice adds each item once. An id whose
-- token floor lives (:floor:<id>, completed within the idle TTL) gets an
-- entry holding it, 'token 0 ', so that its next claim goes on from it
-- without looking for one. Publishes on :ready when it added any to an
-- empty :pending: a claimer waits only after finding it empty, and every
-- script that makes it non-empty publishes. Replies how many it added.
local pending = KEYS[1] .. ':pending'
local score, empty
local added = 0
for _, id in ipairs(ARGV) do
  if redis.call('HEXISTS', KEYS[1], id) == 0 then
    local rec = redis.call('MGET', KEYS[1] .. ':done:' .. id, KEYS[1] .. ':floor:' .. id)
    if not rec[1] then
      if not score then score, empty = tail() end
      if redis.call('ZADD', pending, 'NX', score, id) == 1 then
        if rec[2] then
          redis.call('HSET', KEYS[1], id, rec[2] .. ' 0 ')
          redis.call('DEL', KEYS[1] .. ':floor:' .. id)
        end
        added = added + 1
        score = score + 1
      end
    end
  end
end
if added > 0 and empty then redis.call('PUBLISH', KEYS[1] .. ':ready', added) end
return added
