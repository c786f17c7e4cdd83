-- A key's windows and ban as the limit check (check.lua) would see them, writing nothing: the quota endpoint and the
-- admin API read them without spending a request (src/limits/redis-store.ts). Every key carries the subject's hash tag.
--
-- KEYS
--   1     record: the key record (for a key of a consumer, the consumer's hash of its keys' records)
--   2     ban: the ban hash (until, level, lastEnd)
--   3...  per window: window: the windows asked for, one counter each
-- ARGV
--   1     resetAfterMs: resetAfterMs of the ban ladder (a ban level older than this is forgotten)
--   2     keyHash: the key's hash ('' = do not check the record)
--   3     recordField: '' = the record is the string at KEYS[1]; else the key id: its field of the hash at KEYS[1]
-- Reply
--   1     keyState: 'ok', 'invalid_key', 'invalid_record'
--   2     now: Redis TIME, ms
--   3     banMs: ms until the ban ends
--   4     banLevel: the ban level
--   5...  per window: used, resetMs: points used, ms until it ends (-1: not started)
--   (invalid_* replies stop after the level.)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[2] ~= '' then
  local raw
  if ARGV[3] == '' then raw = redis.pcall('GET', KEYS[1]) else raw = redis.pcall('HGET', KEYS[1], ARGV[3]) end
  if not raw then return {'invalid_key', now, 0, 0} end
  if type(raw) ~= 'string' then return {'invalid_record', now, 0, 0} end
  local ok, rec = pcall(cjson.decode, raw)
  if not ok or type(rec) ~= 'table' then return {'invalid_record', now, 0, 0} end
  local current = rec.hash == ARGV[2]
  local grace = rec.prevHash == ARGV[2] and now < (tonumber(rec.prevHashUntil) or 0)
  if rec.status ~= 'active' or not (current or grace) then return {'invalid_key', now, 0, 0} end
end
local ban = redis.call('HMGET', KEYS[2], 'until', 'level', 'lastEnd')
local banUntil, level, lastEnd = tonumber(ban[1] or '0'), tonumber(ban[2] or '0'), tonumber(ban[3] or '0')
if lastEnd > 0 and now >= lastEnd + tonumber(ARGV[1]) then level = 0 end
local reply = {'ok', now, math.max(0, banUntil - now), level}
for i = 3, #KEYS do
  local ttl = redis.call('PTTL', KEYS[i])
  if ttl < 0 then
    reply[#reply + 1] = 0
    reply[#reply + 1] = -1
  else
    reply[#reply + 1] = tonumber(redis.call('GET', KEYS[i]) or '0')
    reply[#reply + 1] = ttl
  end
end
return reply
