-- A refund: one admitted request given back because it never reached a target (src/limits/redis-store.ts).
-- Every key carries the subject's hash tag (src/limits/subject.ts): one slot.
--
-- KEYS
--   1     usageDay: the usage ledger's day the check counted the request in
--   2...  per window: window: the windows the request took points from (a shadow window that had no room took none:
--         not here)
-- ARGV
--   1     cost: the request's cost: the points given back to each window
--   2     ledgerField: the ledger's admitted field of that hour ('' = not counted there)
--   3...  per window (same order as KEYS[2...]): remainingMs, lengthMs: how long the window the check counted in runs
--         from now, as the gateway reckons it (its reset then, less the time since: no clock is compared), and the
--         window's length
-- Reply
--   1     done: 1
--
-- A window is given the points back only while it is the same window: one opened since ends at least a whole window
-- later than the one the check saw, so a remaining time past half a window more than reckoned is another window (and
-- left alone); never below zero. The ledger takes one count out of admitted, only when there is one: a request that
-- reached no target is not billed. (One that reached a target is never refunded; it is counted upstreamFailed.)
-- Strikes and bans are not touched: a refund never lifts or shortens a ban, nor takes back a strike.
local cost = tonumber(ARGV[1])
for i = 2, #KEYS do
  local left, len = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  local ttl = redis.call('PTTL', KEYS[i])
  if ttl > 0 and ttl < left + len / 2 then
    local used = tonumber(redis.call('GET', KEYS[i])) or 0
    if used > 0 then redis.call('DECRBY', KEYS[i], math.min(cost, used)) end
  end
end
if ARGV[2] ~= '' and (tonumber(redis.call('HGET', KEYS[1], ARGV[2])) or 0) > 0 then
  redis.call('HINCRBY', KEYS[1], ARGV[2], -1)
end
return 1
