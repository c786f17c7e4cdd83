-- Claims the due events of one webhook endpoint for delivery (src/events/endpoint-queue.ts): each one's due time moves
-- to the lease's end, so no other instance sends it meanwhile, and the lease's end is the token the attempt's outcome
-- is settled with (settle.lua). KEYS as in enqueue.lua (due, ev, dead, state, queued): one slot.
--
-- ARGV
--   1  now         ms: events due at or before it are claimed
--   2  leaseUntil  ms: their new due time
--   3  limit       at most this many
-- Reply
--   1     nextDue: the earliest due time left after the claim (ms, as text), '' when nothing is queued
--   2     queued: events queued (ZCARD due)
--   3     disabled: 1 while the endpoint is disabled (nothing is claimed), else 0
--   4...  per claimed event: id, record JSON
local reply = {'', redis.call('ZCARD', KEYS[1]), 0}
if redis.call('HEXISTS', KEYS[4], 'disabled') == 1 then
  reply[3] = 1
  return reply
end
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, id in ipairs(ids) do
  local record = redis.call('HGET', KEYS[2], id)
  if record then
    redis.call('ZADD', KEYS[1], ARGV[2], id)
    reply[#reply + 1] = id
    reply[#reply + 1] = record
  else
    -- A due entry without its record (not written by these scripts): dropped rather than claimed for ever.
    redis.call('ZREM', KEYS[1], id)
    redis.call('ZREM', KEYS[5], id)
  end
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if first[2] then reply[1] = first[2] end
reply[2] = redis.call('ZCARD', KEYS[1])
return reply
