-- One webhook endpoint's queue as the dashboard and the admin API show it (src/events/endpoint-queue.ts), read at one
-- instant. KEYS as in enqueue.lua (due, ev, dead, state, queued): one slot.
--
-- ARGV
--   1  deadLimit  how many of the most recently dead events to return with their records (0: none)
-- Reply
--   1  state: the state hash as field, value, field, value, ...
--   2  queued: events queued (ZCARD due)
--   3  dead: events in the dead set
--   4  nextDue: the earliest due time (ms, as text), '' when nothing is queued
--   5  oldest: the record JSON of the oldest queued event, '' when none
--   6  recent dead: id, record JSON, ... newest first
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local oldestId = redis.call('ZRANGE', KEYS[5], 0, 0)[1]
local oldest = ''
if oldestId then oldest = redis.call('HGET', KEYS[2], oldestId) or '' end
local recent = {}
local n = tonumber(ARGV[1])
if n > 0 then
  for _, id in ipairs(redis.call('ZREVRANGE', KEYS[3], 0, n - 1)) do
    recent[#recent + 1] = id
    recent[#recent + 1] = redis.call('HGET', KEYS[2], id) or ''
  end
end
return {redis.call('HGETALL', KEYS[4]), redis.call('ZCARD', KEYS[1]), redis.call('ZCARD', KEYS[3]), first[2] or '', oldest, recent}
