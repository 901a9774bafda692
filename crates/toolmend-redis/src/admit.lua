-- toolmend guard admission, script version 1 (keys under tm:v1:).
-- One call per message: every check of every call, in call order, atomically.
-- KEYS[1]: the session's seen ids (a sorted set) when ARGV[2] == '1'; the other KEYS: the
-- checks' keys (a window: a list of admission times in ms; a budget: a counter).
-- ARGV[1]: the session TTL in ms; ARGV[2]: '1' with a session, '0' without; then two
-- values per call: its id, and its checks as "key,limit,window,shadow;" with key an index
-- into KEYS, window -1 for a budget, shadow 0 or 1.
-- Returns per call: {admitted, id_seen, passed1, count1, retry1, passed2, ...}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
local has_session = ARGV[2] == '1'
local MAX_IDS = 10000

-- What each key holds, as last seen or written by this script: 'list', 'count' (a live
-- numeric counter), 'none', or 'other' (another kind: started over when written).
local kinds = {}
-- Expiry (absolute ms) of the keys written, set once at the end; and their order.
local expires = {}
local written = {}

local function expire(key, at)
  if not expires[key] then written[#written + 1] = key end
  expires[key] = at
end

local function is_error(r)
  return type(r) == 'table' and r.err ~= nil
end

local function evaluate(key, limit, window)
  if window >= 0 then
    local head = redis.pcall('LINDEX', key, 0)
    if is_error(head) then
      kinds[key] = 'other'
      return limit > 0, 0, 0
    end
    local from = now - window
    while head and tonumber(head) <= from do
      redis.call('LPOP', key)
      head = redis.call('LINDEX', key, 0)
    end
    if not head then
      kinds[key] = 'none'
      return limit > 0, 0, 0
    end
    kinds[key] = 'list'
    local count = redis.call('LLEN', key)
    if count < limit then return true, count, 0 end
    -- The oldest admission that must leave the window before one more fits.
    local oldest = redis.call('LINDEX', key, count - limit)
    local retry = 0
    if oldest then retry = math.max(tonumber(oldest) + window - now, 0) end
    return false, count, retry
  end
  local v = redis.pcall('GET', key)
  if is_error(v) then
    kinds[key] = 'other'
    return limit > 0, 0, 0
  end
  if not v then
    kinds[key] = 'none'
    return limit > 0, 0, 0
  end
  local n = tonumber(v)
  -- The key's time left: as written by this script, or as Redis has it. A counter whose
  -- TTL ends this millisecond counts as gone (as in the memory store).
  local left
  if expires[key] then left = expires[key] - now else left = redis.call('PTTL', key) end
  if not n or left == 0 or left == -2 then
    kinds[key] = 'other'
    return limit > 0, 0, 0
  end
  kinds[key] = 'count'
  if n < limit then return true, n, 0 end
  return false, n, math.max(left, 0)
end

local function record(key, limit, window)
  local kind = kinds[key]
  if window >= 0 then
    if kind ~= 'list' and kind ~= 'none' then redis.call('DEL', key) end
    local len = redis.call('RPUSH', key, now)
    -- A shadow rule admits past its limit: the log stays bounded by the limit.
    local cap = math.max(limit, 1)
    if len > cap then redis.call('LTRIM', key, len - cap, -1) end
    kinds[key] = 'list'
    expire(key, now + window)
  else
    if kind ~= 'count' and kind ~= 'none' then redis.call('DEL', key) end
    redis.call('INCR', key)
    kinds[key] = 'count'
    expire(key, now + ttl)
  end
end

-- Seen ids, in insertion order (the score), the oldest leaving past MAX_IDS.
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
    held = redis.call('ZCARD', ids)
  end
  local added = redis.call('ZADD', ids, 'NX', seq + 1, id)
  if added == 0 then return 1 end
  seq = seq + 1
  held = held + 1
  if held > MAX_IDS then
    redis.call('ZPOPMIN', ids, held - MAX_IDS)
    held = MAX_IDS
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

for _, key in ipairs(written) do
  redis.call('PEXPIREAT', key, expires[key])
end
if has_session and #ARGV >= 3 then redis.call('PEXPIRE', ids, ttl) end
return out
