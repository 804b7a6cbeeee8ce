-- leave: a waiter that gives up drops its ticket.
--
-- KEYS[1]  the lock's hash (see state.lua)
-- ARGV[1]  owner
--
-- Replies 1 when there was a ticket, else 0. A waiter that leaves may have
-- been holding up those behind it (a writer the readers after it, the
-- head a writer), so they are woken.
if dequeue(ARGV[1]) == 0 then return 0 end
drop_lapsed()
wake()
return 1
