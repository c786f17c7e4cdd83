-- Settles one delivery attempt of a claimed event (src/events/endpoint-queue.ts). KEYS as in enqueue.lua (due, ev,
-- dead, state, queued): one slot.
--
-- ARGV
--   1  id        the event id
--   2  lease     the due time its claim set (claim.lua's leaseUntil): only the holder of the current lease settles a
--                failure (a lease that ran out was claimed again, and the newer attempt decides)
--   3  outcome   delivered | retry | dead | disable
--   4  now       ms
--   5  dueAt     retry: when the next attempt is due (ms)
--   6  error     the attempt's failure, as the dashboard shows it ('' when delivered)
--   7  status    the HTTP status answered ('' when none was)
--   8  maxDead   dead: the dead set's bound (the oldest dead events are forgotten past it)
--   9  reason    disable: why the endpoint is disabled
-- Reply
--   1  settled: 1, or 0 when the event is no longer this lease's (delivered, dropped, or claimed again)
--
-- delivered removes the event whatever the lease (it reached the receiver). retry counts the attempt and sets the next
-- due time. dead moves it to the dead set (counted failed). disable (a 410) counts the attempt, disables the endpoint
-- and leaves the event due now, to go first once the endpoint is enabled again.
local id, outcome, now = ARGV[1], ARGV[3], ARGV[4]
if ARGV[7] ~= '' then redis.call('HSET', KEYS[4], 'lastStatus', ARGV[7]) end
if outcome == 'delivered' then
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', KEYS[5], id)
  redis.call('HDEL', KEYS[2], id)
  redis.call('HINCRBY', KEYS[4], 'delivered', 1)
  redis.call('HSET', KEYS[4], 'lastDeliveredAt', now)
  return 1
end
redis.call('HSET', KEYS[4], 'lastError', ARGV[6], 'lastErrorAt', now)
local score = redis.call('ZSCORE', KEYS[1], id)
local record = redis.call('HGET', KEYS[2], id)
if not score or not record or tonumber(score) ~= tonumber(ARGV[2]) then return 0 end
-- A record these scripts did not write is settled all the same (as an empty one), never an error for ever.
local ok, r = pcall(cjson.decode, record)
if not ok or type(r) ~= 'table' then r = {} end
r.attempts = (tonumber(r.attempts) or 0) + 1
r.lastError = ARGV[6]
r.lastAt = tonumber(now)
if ARGV[7] ~= '' then r.lastStatus = tonumber(ARGV[7]) end
if outcome == 'retry' then
  redis.call('ZADD', KEYS[1], ARGV[5], id)
elseif outcome == 'disable' then
  redis.call('ZADD', KEYS[1], now, id)
  redis.call('HSET', KEYS[4], 'disabled', '1', 'disabledReason', ARGV[9], 'disabledAt', now)
elseif outcome == 'dead' then
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', KEYS[5], id)
  r.diedAt = tonumber(now)
  redis.call('ZADD', KEYS[3], now, id)
  redis.call('HINCRBY', KEYS[4], 'failed', 1)
  local over = redis.call('ZCARD', KEYS[3]) - tonumber(ARGV[8])
  if over > 0 then
    local oldest = redis.call('ZPOPMIN', KEYS[3], over)
    for i = 1, #oldest, 2 do
      if oldest[i] ~= id then redis.call('HDEL', KEYS[2], oldest[i]) end
    end
    if redis.call('ZSCORE', KEYS[3], id) == false then
      redis.call('HDEL', KEYS[2], id)
      return 1
    end
  end
else
  return redis.error_reply('unknown outcome ' .. outcome)
end
redis.call('HSET', KEYS[2], id, cjson.encode(r))
return 1
