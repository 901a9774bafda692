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

local function kind(key)
  return redis.call('TYPE', key)['ok']
end

-- A budget key whose TTL ends this millisecond counts as gone (as in the memory store).
local function live_budget(key)
  return redis.call('PTTL', key) ~= 0
end

local function evaluate(key, limit, window)
  local ty = kind(key)
  if window >= 0 then
    if ty ~= 'list' then return limit > 0, 0, 0 end
    local from = now - window
    while true do
      local head = redis.call('LINDEX', key, 0)
      if not head or tonumber(head) > from then break end
      redis.call('LPOP', key)
    end
    local count = redis.call('LLEN', key)
    if count < limit then return true, count, 0 end
    -- The oldest admission that must leave the window before one more fits.
    local oldest = redis.call('LINDEX', key, count - limit)
    local retry = 0
    if oldest then retry = math.max(tonumber(oldest) + window - now, 0) end
    return false, count, retry
  end
  if ty ~= 'string' or not live_budget(key) then return limit > 0, 0, 0 end
  local n = tonumber(redis.call('GET', key)) or 0
  if n < limit then return true, n, 0 end
  return false, n, math.max(redis.call('PTTL', key), 0)
end

local function record(key, limit, window)
  local ty = kind(key)
  if window >= 0 then
    if ty ~= 'list' and ty ~= 'none' then redis.call('DEL', key) end
    local len = redis.call('RPUSH', key, now)
    -- A shadow rule admits past its limit: the log stays bounded by the limit.
    local cap = math.max(limit, 1)
    if len > cap then redis.call('LTRIM', key, len - cap, -1) end
    redis.call('PEXPIRE', key, window)
  else
    if ty ~= 'none' and (ty ~= 'string' or not live_budget(key)
        or not tonumber(redis.call('GET', key))) then
      redis.call('DEL', key)
    end
    redis.call('INCR', key)
    redis.call('PEXPIRE', key, ttl)
  end
end

-- Seen ids, in insertion order (score), the oldest leaving past MAX_IDS.
local function seen(id)
  local key = KEYS[1]
  if kind(key) ~= 'zset' then redis.call('DEL', key) end
  local was = redis.call('ZSCORE', key, id)
  if not was then
    local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    local seq = 1
    if top[2] then seq = tonumber(top[2]) + 1 end
    redis.call('ZADD', key, seq, id)
    local n = redis.call('ZCARD', key)
    if n > MAX_IDS then redis.call('ZPOPMIN', key, n - MAX_IDS) end
  end
  redis.call('PEXPIRE', key, ttl)
  if was then return 1 end
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
return out
