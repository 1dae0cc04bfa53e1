"""The Lua scripts of the Redis frontier: each runs atomically inside Redis.

Keys (``P`` is ``eclaw:<spider>:``)::

    P queue            zset  request id -> score (-priority * 1e13 + id: priority first, then FIFO)
    P requests         hash  request id -> its record (serial.to_text: a line) of a queued or leased request
    P seq              int   the last request id
    P bloom / P seen   Bloom filter bits (a string) / a plain set of fingerprints
    P workers          zset  worker -> heartbeat deadline (ms)
    P leases:<worker>  zset  request id -> its queue score (requests the worker holds)
    P slots:<host>     zset  slot token ("<worker>:<id>") -> deadline (ms): downloads on that host, cluster-wide
    P hosts:<worker>   set   hosts where the worker has taken slots
    P next:<host>      int   when the host's next download may start (ms)
    P items            hash  item id -> JSON (each item once, however often its request is redone)
    P stats            hash  worker -> its stats (JSON)
    P seeded           "1" once start requests were pushed
    P reply:<token>    string  the ids a LEASE gave (JSON), kept while the call may be sent again
    P events           pub/sub channel: "work" (requests landed in an empty queue), "end" (the
                       last lease was dropped: nothing queued, nothing leased); see eclaw.cluster.wakeups
"""

from __future__ import annotations

__all__ = ["ACQUIRE", "COMPLETE", "COUNT", "ENQUEUE", "LEASE", "MARK", "PACE", "REAP", "REQUEUE"]

# The duplicate check of ENQUEUE and MARK: KEYS[1] seen-structure; ARGV: mode, n, n bit positions
# (bloom) or the fingerprint (set). Sets them; `new` is 0 if they were all set already.
_SEEN = """
local mode, n = ARGV[1], tonumber(ARGV[2])
local new = 1
if mode == 'bloom' then
  local get, set = {}, {}  -- one BITFIELD reads every bit, one sets them: 2 commands, not 2n
  for i = 1, n do
    get[3 * i - 2], get[3 * i - 1], get[3 * i] = 'GET', 'u1', ARGV[2 + i]
    set[4 * i - 3], set[4 * i - 2], set[4 * i - 1], set[4 * i] = 'SET', 'u1', ARGV[2 + i], 1
  end
  new = 0
  for _, bit in ipairs(redis.call('BITFIELD', KEYS[1], unpack(get))) do
    if bit == 0 then new = 1 end
  end
  if new == 1 then redis.call('BITFIELD', KEYS[1], unpack(set)) end
elseif mode == 'set' then
  new = redis.call('SADD', KEYS[1], ARGV[3])
end
"""

# KEYS: seen-structure, queue, requests, seq, events. ARGV: mode, n, n bit positions (bloom) or
# the fingerprint (set), record, priority. Returns the new id, or 0 for a duplicate.
ENQUEUE = (
    _SEEN
    + """
if new == 0 then return 0 end
local id = redis.call('INCR', KEYS[4])
redis.call('ZADD', KEYS[2], -tonumber(ARGV[4 + n]) * 1e13 + id, id)
redis.call('HSET', KEYS[3], id, ARGV[3 + n])
if redis.call('ZCARD', KEYS[2]) == 1 then redis.call('PUBLISH', KEYS[5], 'work') end
return id
"""
)

# KEYS: seen-structure. ARGV: as ENQUEUE's, without record and priority. Records a URL as seen
# without queueing it (where a redirect led); returns 1 if it was new, else 0.
MARK = (
    _SEEN
    + """
return new
"""
)

# KEYS: queue, requests, leases:<worker>, workers. ARGV: count, key prefix, call token, how long its
# reply is kept (ms). Moves up to count requests from the queue to the worker's leases, but no more
# than the worker's share of the queue (queued / workers, at least one: an idle worker may take the
# next); returns the number of workers, then id, record, id, record... or, with the queue empty,
# {workers, leased}: how many requests every worker holds (the crawl may not be over).
# A call sent again with its token (its reply was lost with the connection: Redis shutting down, say)
# gets the requests of the first (their ids are kept, never their records, which may hold
# credentials): they are the caller's, not orphans that a live worker would hold for ever, so that
# the crawl could never end.
LEASE = """
local kept = ARGV[2] .. 'reply:' .. ARGV[3]
local ids = redis.call('GET', kept)
if ids then  -- sent again: the same ids, their records read again (a record may hold credentials: never kept)
  local again = {math.max(1, redis.call('ZCARD', KEYS[4]))}
  for _, id in ipairs(cjson.decode(ids)) do
    again[#again + 1] = id
    again[#again + 1] = redis.call('HGET', KEYS[2], id) or ''
  end
  return again
end
local workers = math.max(1, redis.call('ZCARD', KEYS[4]))
local share = math.floor(redis.call('ZCARD', KEYS[1]) / workers)
local popped = redis.call('ZPOPMIN', KEYS[1], math.max(1, math.min(tonumber(ARGV[1]), share)))
if #popped == 0 then
  local leased = 0
  for _, worker in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
    leased = leased + redis.call('ZCARD', ARGV[2] .. 'leases:' .. worker)
  end
  return {workers, leased}
end
local out, leased = {workers}, {}
for i = 1, #popped, 2 do
  redis.call('ZADD', KEYS[3], popped[i + 1], popped[i])
  out[#out + 1] = popped[i]
  out[#out + 1] = redis.call('HGET', KEYS[2], popped[i]) or ''
  leased[#leased + 1] = popped[i]
end
redis.call('SET', kept, cjson.encode(leased), 'PX', tonumber(ARGV[4]))
return out
"""

# KEYS: leases:<worker>, requests, workers, queue, events. ARGV: id, key prefix. The request is
# done: drop its lease and record (1), unless the lease was taken back from a worker presumed
# dead (0). The last lease of the crawl (nothing queued, nothing leased) tells every worker.
COMPLETE = """
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HDEL', KEYS[2], ARGV[1])
if redis.call('ZCARD', KEYS[1]) == 0 and redis.call('ZCARD', KEYS[4]) == 0 then
  local leased = 0
  for _, worker in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
    leased = leased + redis.call('ZCARD', ARGV[2] .. 'leases:' .. worker)
  end
  if leased == 0 then redis.call('PUBLISH', KEYS[5], 'end') end
end
return 1
"""

# KEYS: leases:<worker>, queue, requests, events. ARGV: id, record, priority. A leased request
# goes back to the queue (a retry), with its new record.
REQUEUE = """
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], -tonumber(ARGV[3]) * 1e13 + tonumber(ARGV[1]), ARGV[1])
if redis.call('ZCARD', KEYS[2]) == 1 then redis.call('PUBLISH', KEYS[4], 'work') end
return 1
"""

# KEYS: workers, queue. ARGV: key prefix, this worker, its new deadline (ms from now).
# Renews this worker's heartbeat, and gives the leases of workers whose deadline passed
# back to the queue (and frees their host slots). Returns the number of requests given back.
REAP = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
local back = 0
for _, worker in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)) do
  local leases = ARGV[1] .. 'leases:' .. worker
  local held = redis.call('ZRANGE', leases, 0, -1, 'WITHSCORES')
  for i = 1, #held, 2 do
    redis.call('ZADD', KEYS[2], held[i + 1], held[i])
    back = back + 1
  end
  redis.call('DEL', leases)
  local mine = worker .. ':'
  for _, host in ipairs(redis.call('SMEMBERS', ARGV[1] .. 'hosts:' .. worker)) do
    local slots = ARGV[1] .. 'slots:' .. host
    for _, token in ipairs(redis.call('ZRANGE', slots, 0, -1)) do
      if string.sub(token, 1, #mine) == mine then redis.call('ZREM', slots, token) end
    end
  end
  redis.call('DEL', ARGV[1] .. 'hosts:' .. worker)
  redis.call('ZREM', KEYS[1], worker)
end
if back > 0 then redis.call('PUBLISH', ARGV[1] .. 'events', 'work') end
return back
"""

# KEYS: workers, queue, seeded. ARGV: key prefix. Returns queued, leased (all workers), seeded.
COUNT = """
local leased = 0
for _, worker in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  leased = leased + redis.call('ZCARD', ARGV[1] .. 'leases:' .. worker)
end
return {redis.call('ZCARD', KEYS[2]), leased, redis.call('EXISTS', KEYS[3])}
"""

# KEYS: slots:<host>, next:<host>, hosts:<worker>. ARGV: limit, delay (ms), token, slot lifetime (ms), host.
# Takes one of the host's cluster-wide download slots: 0 if taken, -1 if none is free, else the ms
# to wait for the host's politeness delay.
ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return -1 end
local nxt = tonumber(redis.call('GET', KEYS[2]) or '0')
if now < nxt then return nxt - now end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[4]), ARGV[3])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[4]))
redis.call('SADD', KEYS[3], ARGV[5])
if tonumber(ARGV[2]) > 0 then
  redis.call('SET', KEYS[2], now + tonumber(ARGV[2]), 'PX', tonumber(ARGV[2]) + 1000)
end
return 0
"""

# KEYS: next:<host>. ARGV: the host's delay (ms). A request to the host has just been sent: its next start,
# cluster-wide, counts from now (ACQUIRE counted from the grant: a worker slow to send would shorten the gap
# the site sees). Never moves the next start back.
PACE = """
local t = redis.call('TIME')
local nxt = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
if nxt > tonumber(redis.call('GET', KEYS[1]) or '0') then
  redis.call('SET', KEYS[1], nxt, 'PX', tonumber(ARGV[1]) + 1000)
end
return 0
"""
