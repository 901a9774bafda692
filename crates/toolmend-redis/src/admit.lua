-- toolmend guard admission, script version 1 (keys under tm:v1:).
-- One call per message: every check of every call, in call order, atomically.
-- KEYS[1]: the session's seen ids (a sorted set) when ARGV[2] == '1'; the other KEYS: the
-- checks' keys (a window: a list of admission times in ms; a budget: "<n>:<expiry ms>").
-- ARGV[1]: the session TTL in ms; ARGV[2]: '1' with a session, '0' without; then two
-- values per call: its id, and its checks as "key,limit,window,shadow;" with key an index
-- into KEYS, window -1 for a budget, shadow 0 or 1.
-- Returns per call: {admitted, id_seen, passed1, count1, retry1, passed2, ...}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
local has_session = ARGV[2] == '1'
local MAX_IDS = 10000

-- Each key is read at most once per message and written once at the end; in between the
-- script keeps a model of it, so later calls of the message see the earlier ones.
-- A key's state: kind 'list' (a window log: the Redis entries from `drop` to `base - 1`,
-- then `pend` new entries at `now`), 'count' (a live numeric counter `n`), 'none', or
-- 'other' (another kind, started over when written); `exp`: its expiry (absolute ms);
-- `dirty`: written by this message; `reset`: to be deleted before it is written.
local state = {}
local order = {}

local function is_error(r)
  return type(r) == 'table' and r.err ~= nil
end

local function load_list(st, key)
  local head = redis.pcall('LINDEX', key, 0)
  if is_error(head) then return false end
  st.kind = 'list'
  st.drop, st.pend = 0, 0
  if head then
    st.base = redis.call('LLEN', key)
    st.head = tonumber(head)
  else
    st.base = 0
  end
  return true
end

-- A counter is stored as "<n>:<expiry ms>" (its own expiry, on the script's clock).
local function load_count(st, key)
  local v = redis.pcall('GET', key)
  if is_error(v) then return false end
  if not v then
    st.kind = 'none'
    return true
  end
  local n, exp = string.match(v, '^(%d+):(%d+)$')
  n, exp = tonumber(n), tonumber(exp)
  -- A counter whose expiry is now or past counts as gone (as in the memory store).
  if not n or exp <= now then
    st.kind = 'other'
  else
    st.kind, st.n, st.exp = 'count', n, exp
  end
  return true
end

local function get(key, window)
  local st = state[key]
  if st then return st end
  st = {}
  state[key] = st
  order[#order + 1] = key
  if window >= 0 then
    if not load_list(st, key) and not load_count(st, key) then st.kind = 'other' end
  else
    if not load_count(st, key) and not load_list(st, key) then st.kind = 'other' end
  end
  return st
end

-- The model's entry at index j (0-based) of a window log.
local function entry(st, key, j)
  if j < st.base - st.drop then
    return tonumber(redis.call('LINDEX', key, st.drop + j))
  end
  return now
end

local function evaluate(key, limit, window)
  local st = get(key, window)
  if window >= 0 then
    if st.kind ~= 'list' then return limit > 0, 0, 0 end
    local from = now - window
    -- Entries at or before `from` leave (from the Redis part first: it is older).
    while st.base - st.drop > 0 do
      if not st.head then st.head = tonumber(redis.call('LINDEX', key, st.drop)) end
      if st.head and st.head > from then break end
      st.drop = st.drop + 1
      st.head = nil
    end
    if st.base - st.drop == 0 and now <= from then st.pend = 0 end
    local count = st.base - st.drop + st.pend
    if count == 0 then return limit > 0, 0, 0 end
    if count < limit then return true, count, 0 end
    -- The oldest admission that must leave the window before one more fits.
    local retry = 0
    if count - limit < count then
      retry = math.max(entry(st, key, count - limit) + window - now, 0)
    end
    return false, count, retry
  end
  if st.kind ~= 'count' then return limit > 0, 0, 0 end
  if st.n < limit then return true, st.n, 0 end
  local retry = 0
  if st.exp then retry = math.max(st.exp - now, 0) end
  return false, st.n, retry
end

local function record(key, limit, window)
  local st = state[key]
  st.dirty = true
  if window >= 0 then
    if st.kind ~= 'list' then
      st.reset = st.kind ~= 'none'
      st.kind, st.base, st.drop, st.pend, st.head = 'list', 0, 0, 0, nil
    end
    st.pend = st.pend + 1
    -- A shadow rule admits past its limit: the log stays bounded by the limit.
    local over = st.base - st.drop + st.pend - math.max(limit, 1)
    if over > 0 then
      local from_redis = math.min(over, st.base - st.drop)
      if from_redis > 0 then
        st.drop = st.drop + from_redis
        st.head = nil
      end
      st.pend = st.pend - (over - from_redis)
    end
    st.exp = now + window
  else
    if st.kind ~= 'count' then st.kind, st.n = 'count', 0 end
    st.n = st.n + 1
    st.exp = now + ttl
  end
end

local function flush()
  for _, key in ipairs(order) do
    local st = state[key]
    if st.dirty then
      if st.kind == 'count' then
        redis.call('SET', key, st.n .. ':' .. st.exp, 'PXAT', st.exp)
      else
        if st.reset then redis.call('DEL', key) end
        if st.drop > 0 then redis.call('LTRIM', key, st.drop, -1) end
        local left = st.pend
        while left > 0 do
          local batch = {}
          for b = 1, math.min(left, 1000) do batch[b] = now end
          redis.call('RPUSH', key, unpack(batch))
          left = left - #batch
        end
        redis.call('PEXPIREAT', key, st.exp)
      end
    end
  end
end

-- Seen ids, in insertion order (the score), the oldest leaving past MAX_IDS. The set holds
-- at most as many ids as its top score, so it is counted only once that passes MAX_IDS.
local ids = KEYS[1]
local seq, held
local function seen(id)
  if not seq then
    local top = redis.pcall('ZRANGE', ids, -1, -1, 'WITHSCORES')
    if is_error(top) then
      redis.call('DEL', ids)
      top = {}
    end
    seq = 0
    if top[2] then seq = tonumber(top[2]) end
  end
  local added = redis.call('ZADD', ids, 'NX', seq + 1, id)
  if added == 0 then return 1 end
  seq = seq + 1
  if seq > MAX_IDS then
    if not held then held = redis.call('ZCARD', ids) else held = held + 1 end
    if held > MAX_IDS then
      redis.call('ZPOPMIN', ids, held - MAX_IDS)
      held = MAX_IDS
    end
  end
  return 0
end

local out = {}
local i = 3
while i + 1 <= #ARGV do
  local id = ARGV[i]
  local spec = ARGV[i + 1]
  i = i + 2
  local checks = {}
  for k, l, w, s in string.gmatch(spec, '(%d+),(%d+),(%-?%d+),(%d);') do
    checks[#checks + 1] = { KEYS[tonumber(k)], tonumber(l), tonumber(w), s == '1' }
  end
  local answer = { 0, 0 }
  local admitted = true
  for _, c in ipairs(checks) do
    local passed, count, retry = evaluate(c[1], c[2], c[3])
    answer[#answer + 1] = passed and 1 or 0
    answer[#answer + 1] = count
    answer[#answer + 1] = retry
    if not passed and not c[4] then admitted = false end
  end
  if has_session then answer[2] = seen(id) end
  if admitted then
    answer[1] = 1
    for _, c in ipairs(checks) do record(c[1], c[2], c[3]) end
  end
  out[#out + 1] = answer
end

flush()
if has_session and #ARGV >= 3 then redis.call('PEXPIRE', ids, ttl) end
return out
