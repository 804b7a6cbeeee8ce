-- The vote's epoch step with the lost-data guard off: neither read nor
-- stamped.
local function vote_epoch()
  return ''
end
