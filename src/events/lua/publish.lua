-- The outbox's one write: an event appended to the outbox stream once, whichever instances and retries publish it
-- (src/events/outbox.ts runs it). The seen marker and the stream share the hash tag {outbox}: one slot on a cluster.
--
-- KEYS
--   1     stream: the outbox stream (events:{outbox})
--   2     seen: the event's marker (events:{outbox}:seen:<event id>), set only if absent
-- ARGV
--   1     seenMs: how long the marker lives (ms): a publish of the same id within it appends nothing
--   2     maxLen: the stream's approximate bound (XADD MAXLEN ~)
--   3...  the entry's fields and values, in pairs (id, type, consumer, key, plan, ce, percent?)
-- Reply
--   the new entry's stream id when appended; false (nil) when the event was seen already
--
-- SET NX first: a publish that finds the marker does nothing else; one that sets it appends in the same script, so an
-- event is never marked without its entry, nor appended twice.
if not redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[1]) then
  return false
end
return redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', unpack(ARGV, 3))
