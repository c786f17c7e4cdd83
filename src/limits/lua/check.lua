-- The limit check: one request of one subject (a key, or a public route's client address: src/limits/subject.ts),
-- decided and counted atomically (src/limits/redis-store.ts runs it). Every key it touches carries the subject's hash
-- tag ({<key id>} for a key; {c:<consumer>} for a key of a consumer, whose pool windows, caps, record, ban and ledger
-- all live in the consumer's slot): on Redis Cluster it runs in one slot.
--
-- KEYS
--   1     record: the key record (a JSON string); for a key of a consumer, the consumer's hash of its keys' records
--         (ARGV recordField names the key's field)
--   2     ban: the ban hash (until, level, lastEnd): with banMode shadow, the would-be bans' own hash (never the
--         enforced one); not read with banMode off
--   3     strikes: the strike counter toward a ban (with banMode shadow, the would-be bans' own counter)
--   4     usageDay: the usage ledger's day as the gateway's clock has it: a hash of per-hour counts, a<h> admitted,
--         r<h> refused by a window, b<h> refused by a ban, s<h> admitted but refused by a window in shadow mode, f<h>
--         admitted but failed by the upstream (refund.lua), w<h> a request a ban in shadow mode would have refused (h =
--         UTC hour 0-23); expiring ARGV[6] ms after the first count of each
--         kind in each hour. Declared even with no ledger (then left alone).
--   5...  per window: window: the request's windows, one counter each: the plan's minute and day first, then the
--         plan's month, the route's, then a key's caps inside its consumer's pool (the key's own windows)
-- ARGV
--   1     ledgerDay: the ledger's day as the gateway's clock has it (UTC days since 1970; '' = no ledger)
--   2     banLadder: the ban ladder, numbers separated by spaces: threshold strikeWindowMs resetAfterMs
--         durationsMs... (parsed only when a request meets a ban or a full window)
--   3     keyHash: the key's hash ('' = do not check the record)
--   4     keyRevision: the revision (SHA-1 of the bytes) of the record the gateway has cached as active for that hash
--         ('' = skip)
--   5     credit: a credit ('' = none): "minuteAt minute minuteMs dayAt day dayMs requests", points the gateway
--         admitted from its memory windows while Redis was out of reach, added to the plan's minute and day windows (at
--         positions minuteAt and dayAt, from 1, among the windows) before the decision; a window that lapsed meanwhile
--         starts with them for minuteMs/dayMs; `requests` go to the ledger as admitted
--   6     ledgerMs: how long a ledger day lives ('' with no ledger)
--   7     cost: the request's cost: the points it takes from every window
--   8     shadow: the windows in shadow mode, bit i-1 for window i ('0' = none: read only when a window is short)
--   9     banMode: the ban ladder's mode: 'enforce' (a ban refuses), 'shadow' (a ban is computed, counted and reported,
--         never refuses), 'off' (no ban is read or written: no strikes, no ban hash)
--   10    recordField: '' = the record is the string at KEYS[1]; else the key id whose field of the hash at KEYS[1]
--         holds the record (a key of a consumer: its record, byte for byte, in the consumer's slot)
--   11... per window (same order as KEYS[5...]): limit, lengthMs: its limit, its length in ms (a monthly window: the
--         time left to its period's end)
--   then  per candidate (a candidate limit; none on most requests): window, limit: the position of the window (1...)
--         whose count it is checked on, and its limit. A candidate has no counter of its own: it is a limit tried in
--         shadow beside an enforced one.
-- Reply
--   1     outcome: 'admitted', 'limited', 'banned', 'banned_now', 'invalid_key', 'invalid_record'
--   2     retryMs: ms until a refused request would be admitted again
--   3     banLevel: the ban level
--   4     recordSame: the record's revision compared (1 same, 0 changed, -1 not compared)
--   5     ledgerHour: the ledger hour on Redis's clock (hours since 1970; -1 with no ledger)
--   6     short: bit i-1 set: window i lacked the cost; bit n+k-1: candidate k would have refused it
--   7     wouldBan: banMode shadow only: 0 none; -1 a would-be ban in force would have refused this request; more than
--         0, this request would have started a ban of that many ms (banLevel is its level)
--   8...  per window: used, resetMs: points used, ms until it ends
--   (invalid_* replies stop after `short`.)
--
-- A request is admitted only when every enforced window has `cost` points left (a key of a consumer: the pool's and its
-- own caps alike); then `cost` is taken from each window that has them. A shadow window without them takes nothing and refuses nothing (the reply says so, and the ledger
-- counts s<h>); nor does a candidate limit its window's count passes, though that window takes the cost as usual. A
-- refusal takes nothing from any window. A ban in shadow mode is decided as an enforced one would be (its own strikes
-- and levels), but the request then gets what its windows say. Time is Redis's own clock (TIME), so instances with skewed
-- clocks agree on windows, bans and the ledger's hours.
--
-- Its cost is Redis CPU on every request, so the admitted path makes as few calls as it can (TIME, GET (HGET) of the record,
-- HMGET of the ban unless banMode is off, INCR (INCRBY for a cost above 1) and PEXPIRE/PTTL per window, the ledger's HINCRBY) and formats no number: the ledger's
-- field is cut from a constant string (bench/README.md, "What the usage ledger costs Redis").
-- Globals (redis.call, KEYS, ARGV, tonumber) are read once into locals: each use of a global is a table lookup.
local call, keys, argv, tonumber = redis.call, KEYS, ARGV, tonumber
local t = call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ledgerDay = tonumber(argv[1])
local keyHash = argv[3]
local same = -1

-- The key record decides validity: the gateway's key cache may be older than a revoke or rotation.
if keyHash ~= '' then
  -- pcall: a record that is not a JSON object (or not a string at all) is that key's fault, reported as such, and
  -- must not surface as a script error the gateway would take for Redis failing.
  local raw
  if argv[10] == '' then raw = redis.pcall('GET', keys[1]) else raw = redis.pcall('HGET', keys[1], argv[10]) end
  if not raw then return {'invalid_key', 0, 0, -1, -1, 0} end
  if type(raw) ~= 'string' then return {'invalid_record', 0, 0, -1, -1, 0} end
  if argv[4] ~= '' then same = (redis.sha1hex(raw) == argv[4]) and 1 or 0 end
  -- Still, byte for byte, the copy the gateway judged this key valid against: nothing to decode.
  if same ~= 1 then
    local ok, rec = pcall(cjson.decode, raw)
    if not ok or type(rec) ~= 'table' then return {'invalid_record', 0, 0, -1, -1, 0} end
    local current = rec.hash == keyHash
    local grace = rec.prevHash == keyHash and now < (tonumber(rec.prevHashUntil) or 0)
    if rec.status ~= 'active' or not (current or grace) then return {'invalid_key', 0, 0, -1, -1, 0} end
  end
end

-- The ledger's hour on Redis's clock, counted in the day the gateway declared (keys[4]) when Redis's clock is in that
-- day (nearly always); else not here: the gateway counts it in Redis's day from the hour in the reply.
local usageDay, h
local hour = -1
if ledgerDay then
  hour = (now - now % 3600000) / 3600000
  h = hour - ledgerDay * 24
  if h >= 0 and h < 24 then usageDay = keys[4] end
end

-- The rarer paths' helpers (a credit, a ban, a window without room), made the first time one of them is taken:
-- making a function costs Redis about 900 instructions per call whether it runs or not, and the admitted path (nearly
-- every request) needs none of them.
local count, ladder, remaining
local function helpers()
  if count then return end
  -- Counts n requests of a kind in the ledger: the field "<kind><h>" is cut from two constant strings of all 24 hours
  -- (hours 0-9 take 2 characters, 10-23 take 3). A count that creates its hour's field gives the day its expiry.
  count = function(early, late, n)
    if not usageDay then return end
    local field = h < 10 and string.sub(early, 2 * h + 1, 2 * h + 2) or string.sub(late, 3 * h - 29, 3 * h - 27)
    if call('HINCRBY', usageDay, field, n) == n then call('PEXPIRE', usageDay, argv[6]) end
  end
  -- The ban ladder (argv[2]): threshold, strike window, reset after, then the ban durations, level 1 first.
  local p
  ladder = function()
    if not p then
      p = {}
      for v in string.gmatch(argv[2], '%S+') do p[#p + 1] = tonumber(v) end
    end
    return p
  end
  -- The time left in a window that holds a count. One without an expiry (a PERSIST by hand) would never end, and a
  -- full one would refuse for good: it is given a whole window from now.
  remaining = function(key, len)
    local ttl = call('PTTL', key)
    if ttl >= 0 then return ttl end
    call('PEXPIRE', key, len)
    return tonumber(len)
  end
end

local n = #keys - 4
-- The usual cost of 1 is told by its text (Lua strings are interned: a pointer comparison, no number conversion).
local one = argv[7] == '1'
local cost = one and 1 or tonumber(argv[7])

-- A credit goes into the plan's windows as they stand; a window that lapsed meanwhile starts with it, for what was
-- left of the gateway's memory window. (Nearly every call has none: nothing of this runs then.)
if argv[5] ~= '' then
  helpers()
  local c = {}
  for v in string.gmatch(argv[5], '%S+') do c[#c + 1] = tonumber(v) end
  for i = 0, 3, 3 do
    local key, pts, ttl = keys[4 + c[1 + i]], c[2 + i], c[3 + i]
    if pts > 0 and call('INCRBY', key, pts) == pts then call('PEXPIRE', key, ttl) end
  end
  if c[7] > 0 then count('a0a1a2a3a4a5a6a7a8a9', 'a10a11a12a13a14a15a16a17a18a19a20a21a22a23', c[7]) end
end

local banMode = argv[9]
local level, wouldBan = 0, 0
if banMode ~= 'off' then
  local ban = call('HMGET', keys[2], 'until', 'level', 'lastEnd')
  local banUntil, lastEnd = tonumber(ban[1] or '0'), tonumber(ban[3] or '0')
  level = tonumber(ban[2] or '0')
  if lastEnd > 0 then
    helpers()
    if now >= lastEnd + ladder()[3] then level = 0 end
  end
  if banUntil > now then
    helpers()
    if banMode == 'shadow' then
      -- Reported, not enforced: the request goes on to its windows (and strikes nothing: a ban would have refused it
      -- before any window).
      wouldBan = -1
    else
      local reply = {'banned', banUntil - now, level, same, hour, 0, 0}
      for i = 1, n do
        local key, len = keys[4 + i], tonumber(argv[10 + 2 * i])
        local used = tonumber(call('GET', key) or '0')
        local ttl = call('PTTL', key)
        if ttl < 0 then used = 0; ttl = len end
        reply[6 + 2 * i], reply[7 + 2 * i] = used, ttl
      end
      count('b0b1b2b3b4b5b6b7b8b9', 'b10b11b12b13b14b15b16b17b18b19b20b21b22b23', 1)
      return reply
    end
  end
end

-- The request is counted in every window at once (most are admitted: one call per window). Whatever a refusal, or a
-- shadow window without room, should not take is given back before anyone else can see it (the script is atomic),
-- and a window this request opened is removed: a window starts with its first admitted request.
-- The reply is made at its size for the plan's two windows (a route's windows make it grow), and holds each window's
-- count as soon as it is known.
local reply = {'admitted', 0, level, same, hour, 0, wouldBan, 0, 0, 0, 0}
local short, refused, bit = 0, false, 1
for i = 1, n do
  -- INCR for the usual cost of 1: the same commands a request made before costs existed.
  local u
  if one then u = call('INCR', keys[4 + i]) else u = call('INCRBY', keys[4 + i], cost) end
  local j = 6 + 2 * i
  reply[j] = u
  if u > tonumber(argv[j + 3]) then
    short = short + bit
    -- Enforced unless its bit is in the shadow mask ('0', the usual mask, is told by its text).
    if argv[8] == '0' or tonumber(argv[8]) % (2 * bit) < bit then refused = true end
  end
  bit = bit * 2
end
-- Candidate limits, on the counts just taken (a request in the candidate's world would have brought the window there).
local c = 11 + 2 * n
while argv[c] do
  if reply[6 + 2 * tonumber(argv[c])] > tonumber(argv[c + 1]) then short = short + bit end
  bit = bit * 2
  c = c + 2
end

-- Admitted, every window with room (nearly every request): each keeps the cost; a window this request opened runs from
-- now. The lengths stay text (Redis reads them) unless a reply needs the number.
if short == 0 then
  for i = 1, n do
    local j = 6 + 2 * i
    -- A window without an expiry (a PERSIST by hand) is given one, as remaining() does.
    local ttl = reply[j] ~= cost and call('PTTL', keys[4 + i]) or -1
    if ttl < 0 then
      call('PEXPIRE', keys[4 + i], argv[j + 4])
      ttl = tonumber(argv[j + 4])
    end
    reply[j + 1] = ttl
  end
  -- The usage ledger counts it here, in the same call as the decision: exact across the fleet. (count(), inlined.)
  if usageDay then
    local field = h < 10 and string.sub('a0a1a2a3a4a5a6a7a8a9', 2 * h + 1, 2 * h + 2) or string.sub('a10a11a12a13a14a15a16a17a18a19a20a21a22a23', 3 * h - 29, 3 * h - 27)
    if call('HINCRBY', usageDay, field, 1) == 1 then call('PEXPIRE', usageDay, argv[6]) end
    if wouldBan ~= 0 then
      helpers()
      count('w0w1w2w3w4w5w6w7w8w9', 'w10w11w12w13w14w15w16w17w18w19w20w21w22w23', 1)
    end
  end
  return reply
end

helpers()
reply[6] = short
bit = 1
local retry = 0
local shadow = tonumber(argv[8])
for i = 1, n do
  local key, u, len = keys[4 + i], reply[6 + 2 * i], tonumber(argv[10 + 2 * i])
  local ttl
  if refused or short % (2 * bit) >= bit then
    -- Takes nothing: the request was refused, or this shadow window has no room for it.
    if u == cost then call('DEL', key) elseif one then call('DECR', key) else call('DECRBY', key, cost) end
    u = u - cost
    ttl = u > 0 and remaining(key, len) or len
    if refused and short % (2 * bit) >= bit and shadow % (2 * bit) < bit and ttl > retry then retry = ttl end
  elseif u == cost then
    call('PEXPIRE', key, len)
    ttl = len
  else
    ttl = remaining(key, len)
  end
  reply[6 + 2 * i], reply[7 + 2 * i] = u, ttl
  bit = bit * 2
end

if refused then
  -- The ladder: a strike per refusal; the threshold's strike starts a ban (in shadow mode only counted and reported).
  -- Under a would-be ban nothing strikes: an enforced ban would have refused the request before any window.
  if banMode ~= 'off' and wouldBan == 0 then
    local lad = ladder()
    local strikes = call('INCR', keys[3])
    if strikes == 1 then call('PEXPIRE', keys[3], lad[2]) end
    if strikes >= lad[1] then
      level = level + 1
      local dur = lad[3 + math.min(level, #lad - 3)]
      call('HSET', keys[2], 'until', now + dur, 'level', level, 'lastEnd', now + dur)
      call('PEXPIRE', keys[2], dur + lad[3])
      call('DEL', keys[3])
      if banMode == 'enforce' then
        count('b0b1b2b3b4b5b6b7b8b9', 'b10b11b12b13b14b15b16b17b18b19b20b21b22b23', 1)
        reply[1], reply[2], reply[3] = 'banned_now', dur, level
        return reply
      end
      wouldBan = dur
      reply[3], reply[7] = level, dur
    end
  end
  count('r0r1r2r3r4r5r6r7r8r9', 'r10r11r12r13r14r15r16r17r18r19r20r21r22r23', 1)
  if wouldBan ~= 0 then count('w0w1w2w3w4w5w6w7w8w9', 'w10w11w12w13w14w15w16w17w18w19w20w21w22w23', 1) end
  reply[1], reply[2] = 'limited', retry
  return reply
end

-- Admitted, though a shadow window or a candidate limit had no room: counted admitted and shadow-refused.
count('a0a1a2a3a4a5a6a7a8a9', 'a10a11a12a13a14a15a16a17a18a19a20a21a22a23', 1)
if short > 0 then count('s0s1s2s3s4s5s6s7s8s9', 's10s11s12s13s14s15s16s17s18s19s20s21s22s23', 1) end
if wouldBan ~= 0 then count('w0w1w2w3w4w5w6w7w8w9', 'w10w11w12w13w14w15w16w17w18w19w20w21w22w23', 1) end
return reply
