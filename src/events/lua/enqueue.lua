-- One event into one webhook endpoint's queue (src/events/endpoint-queue.ts). Every key carries the endpoint's hash
-- tag {ep:<endpoint id>}: one slot.
--
-- KEYS
--   1  due     ZSET event id -> when its next attempt is due (ms)
--   2  ev      HASH event id -> record JSON {event, attempts, firstAt, lastError?, ...} (queued and dead events)
--   3  dead    ZSET event id -> when it was given up (ms)
--   4  state   HASH the endpoint's counters and status
--   5  queued  ZSET event id -> its place in the queue (state's seq at enqueue): the order the bound drops in
-- ARGV
--   1  id       the event id (the CloudEvent's: the same event is queued once)
--   2  record   its record JSON
--   3  now      when it is due (ms)
--   4  max      the queue's bound (events queued, leased ones included)
-- Reply
--   1     added: 1, or 0 when the event is already queued or dead here (an outbox entry read twice)
--   2...  the ids of the oldest events dropped to keep the bound (counted in state's dropped)
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return {0} end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
redis.call('ZADD', KEYS[5], redis.call('HINCRBY', KEYS[4], 'seq', 1), ARGV[1])
redis.call('HINCRBY', KEYS[4], 'enqueued', 1)
local reply = {1}
local over = redis.call('ZCARD', KEYS[5]) - tonumber(ARGV[4])
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
