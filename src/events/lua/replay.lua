-- Puts dead events of one webhook endpoint back in its queue, due now, their schedule started over
-- (src/events/endpoint-queue.ts). KEYS as in enqueue.lua (due, ev, dead, state, queued): one slot.
--
-- ARGV
--   1  now  ms
--   2  max  the queue's bound: past it the oldest queued events are dropped, as on enqueue
--   3  id   one dead event's id, or '' for every dead event
-- Reply
--   1     replayed: how many dead events were put back
--   2...  the ids of the oldest events dropped to keep the bound (counted in state's dropped)
local ids
if ARGV[3] ~= '' then ids = {ARGV[3]} else ids = redis.call('ZRANGE', KEYS[3], 0, -1) end
local replayed = 0
for _, id in ipairs(ids) do
  local record = redis.call('HGET', KEYS[2], id)
  if redis.call('ZREM', KEYS[3], id) == 1 and record then
    local r = cjson.decode(record)
    r.attempts = 0
    r.firstAt = tonumber(ARGV[1])
    r.diedAt = nil
    redis.call('HSET', KEYS[2], id, cjson.encode(r))
    redis.call('ZADD', KEYS[1], ARGV[1], id)
    redis.call('ZADD', KEYS[5], redis.call('HINCRBY', KEYS[4], 'seq', 1), id)
    replayed = replayed + 1
  end
end
local reply = {replayed}
local over = redis.call('ZCARD', KEYS[5]) - tonumber(ARGV[2])
if over > 0 then
  local oldest = redis.call('ZPOPMIN', KEYS[5], over)
  for i = 1, #oldest, 2 do
    redis.call('ZREM', KEYS[1], oldest[i])
    redis.call('HDEL', KEYS[2], oldest[i])
    reply[#reply + 1] = oldest[i]
  end
  redis.call('HINCRBY', KEYS[4], 'dropped', #oldest / 2)
end
return reply
