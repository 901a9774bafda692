-- toolmend guard admission, script version 2 (keys under tm:v2:).
-- One call per message (per slot on a cluster): every check of every call, in call order,
-- atomically. Commands in the common case: TIME, HMGET (the session's hash), MGET (string
-- keys, if any), HSET, SET per written string key, PEXPIREAT.
--
-- KEYS[1]: the session's hash when ARGV[3] == '1' (header `n`, seen ids `i:<id>` and their
-- ring `q:<k>`, and the session's scoped windows and budgets as fields); the other KEYS:
-- string keys (fingerprints, runs, a tool across sessions), each with its own expiry.
-- ARGV[1]: the mode: 'A' every check (a standalone Redis); 'S' a cluster's session part;
-- 'G' a cluster's global part (ids untouched; a call's tag says whether the session part
-- admitted it: '1' may be recorded, '0' evaluated only); 'R' refunds the session part of
-- calls the global part refused (tag unused, ARGV[2] the time the 'S' call recorded them).
-- ARGV[2]: the session TTL in ms (mode R: the time to refund); ARGV[3]: '1' with a hash;
-- ARGV[4]: nf, then nf field names of the hash; then two values per call: its tag (the
-- call id in A and S) and its checks as "ref,limit,window,shadow;" (ref > 0 a KEYS index,
-- ref < 0 the field -ref; window -1 for a budget; shadow 0 or 1).
-- A window is "<expiry ms><time ms>..." (13 digits each, oldest first, at most `limit`
-- times); a budget "<count>:<expiry ms>".
-- Returns {now, {admitted, id_seen, passed1, count1, retry1, ...} per call}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local mode = ARGV[1]
local ttl = tonumber(ARGV[2])
local hash = nil
if ARGV[3] == '1' then hash = KEYS[1] end
local MAX_IDS = 10000
local W = 13
local sub, fmt = string.sub, string.format
local function d13(x) return fmt('%013.0f', x) end
if mode == 'R' then now = ttl end

-- A command over a long list of arguments, in chunks (Lua's unpack has a bound): the
-- replies of a reading command concatenated.
local CHUNK = 1000
local function chunked(cmd, key, list, pcall_first)
  local out = {}
  for from = 1, #list, CHUNK do
    local r
    local to = math.min(from + CHUNK - 1, #list)
    if key then
      if pcall_first then
        r = redis.pcall(cmd, key, unpack(list, from, to))
        if type(r) == 'table' and r.err ~= nil then return r end
      else
        r = redis.call(cmd, key, unpack(list, from, to))
      end
    else
      r = redis.call(cmd, unpack(list, from, to))
    end
    if type(r) == 'table' then
      for _, v in ipairs(r) do out[#out + 1] = v end
    end
  end
  return out
end

local nf = tonumber(ARGV[4])
local fields = {}
for f = 1, nf do fields[f] = ARGV[4 + f] end
local first = 5 + nf

-- The calls, parsed once.
local calls = {}
do
  local i = first
  while i + 1 <= #ARGV do
    local checks = {}
    for r, l, w, s in string.gmatch(ARGV[i + 1], '(%-?%d+),(%d+),(%-?%d+),(%d);') do
      checks[#checks + 1] = { tonumber(r), tonumber(l), tonumber(w), s == '1' }
    end
    calls[#calls + 1] = { tag = ARGV[i], checks = checks }
    i = i + 2
  end
end

-- One read of the hash (header, fields, ids) and one of the string keys.
local use_ids = hash ~= nil and (mode == 'A' or mode == 'S')
local hfields = { 'n' }
for f = 1, nf do hfields[#hfields + 1] = fields[f] end
local id_at = {}
if use_ids then
  for _, c in ipairs(calls) do
    if not id_at[c.tag] then
      hfields[#hfields + 1] = 'i:' .. c.tag
      id_at[c.tag] = #hfields
    end
  end
end
local hvals = {}
if hash then
  local r = chunked('HMGET', hash, hfields, true)
  if type(r) == 'table' and r.err == nil then
    hvals = r
  else
    -- Another kind of value under the session's key (not ours): start over.
    redis.call('DEL', hash)
  end
end
local skeys = {}
for k = 2, #KEYS do skeys[#skeys + 1] = KEYS[k] end
if not hash then
  table.insert(skeys, 1, KEYS[1])
end
local svals = {}
if #skeys > 0 then svals = chunked('MGET', nil, skeys) end
local skey_index = {}
for j, k in ipairs(skeys) do skey_index[k] = j end

-- The header: "<id seq>:<base>:<ids expiry>:<hash expiry>". Ids with a seq at or below
-- `base` expired with the session's TTL.
local idseq, base, ids_exp, hexp = 0, 0, 0, 0
if hvals[1] then
  local a, b, c, d = string.match(hvals[1], '^(%d+):(%d+):(%d+):(%d+)$')
  if a then idseq, base, ids_exp, hexp = tonumber(a), tonumber(b), tonumber(c), tonumber(d) end
end

-- A model of each key or field: read once, written once at the end.
-- kind 'list' (window: `blob`, `base` entries, `drop` left from the front, `pend` new at
-- now), 'count' (`n`), or 'none'; `exp` its expiry; `dirty` written by this message.
local state = {}
local order = {}

local function parse(raw)
  local st = { kind = 'none' }
  if not raw then return st end
  local n, exp = string.match(raw, '^(%d+):(%d+)$')
  if n then
    n, exp = tonumber(n), tonumber(exp)
    -- A counter whose expiry is now or past counts as gone (as in the memory store).
    if exp > now then st.kind, st.n, st.exp = 'count', n, exp end
    return st
  end
  local len = #raw
  if len >= W and len % W == 0 and not string.find(raw, '[^0-9]') then
    local exp = tonumber(sub(raw, 1, W))
    if exp > now then
      st.kind, st.blob, st.base, st.drop, st.pend, st.exp = 'list', raw, len / W - 1, 0, 0, exp
    end
  end
  return st
end

local function get(ref)
  local st = state[ref]
  if st then return st end
  local raw
  if ref < 0 then
    raw = hvals[1 - ref]
  else
    raw = svals[skey_index[KEYS[ref]]]
  end
  st = parse(raw)
  state[ref] = st
  order[#order + 1] = ref
  return st
end

-- The blob's entry at absolute index j (0-based).
local function ent(st, j)
  return tonumber(sub(st.blob, W * (j + 1) + 1, W * (j + 2)))
end

-- The model's entry at index j (0-based) among those left.
local function entry(st, j)
  if j < st.base - st.drop then return ent(st, st.drop + j) end
  return now
end

local function evaluate(ref, limit, window)
  local st = get(ref)
  if window >= 0 then
    if st.kind ~= 'list' then return limit > 0, 0, 0 end
    local from = now - window
    -- Entries at or before `from` leave (a binary search: the times are in order).
    local lo, hi = st.drop, st.base
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      if ent(st, mid) > from then hi = mid else lo = mid + 1 end
    end
    st.drop = lo
    if st.base - st.drop == 0 and now <= from then st.pend = 0 end
    local count = st.base - st.drop + st.pend
    if count == 0 then return limit > 0, 0, 0 end
    if count < limit then return true, count, 0 end
    -- The oldest admission that must leave the window before one more fits.
    local retry = 0
    if count - limit < count then
      retry = math.max(entry(st, count - limit) + window - now, 0)
    end
    return false, count, retry
  end
  if st.kind ~= 'count' then return limit > 0, 0, 0 end
  if st.n < limit then return true, st.n, 0 end
  return false, st.n, math.max(st.exp - now, 0)
end

local function record(ref, limit, window)
  local st = state[ref]
  st.dirty = true
  if window >= 0 then
    if st.kind ~= 'list' then
      st.kind, st.blob, st.base, st.drop, st.pend = 'list', '', 0, 0, 0
    end
    st.pend = st.pend + 1
    -- A shadow rule admits past its limit: the log stays bounded by the limit.
    local over = st.base - st.drop + st.pend - math.max(limit, 1)
    if over > 0 then
      local from_blob = math.min(over, st.base - st.drop)
      st.drop = st.drop + from_blob
      st.pend = st.pend - (over - from_blob)
    end
    st.exp = now + window
  else
    if st.kind ~= 'count' then st.kind, st.n = 'count', 0 end
    st.n = st.n + 1
    st.exp = now + ttl
  end
end

-- Mode R: takes back one admission at `now` (the 'S' call's time) from a key.
local function refund(ref, window)
  local st = get(ref)
  if window >= 0 then
    if st.kind ~= 'list' then return end
    local j = st.base - 1
    while j >= 0 do
      local v = ent(st, j)
      if v == now then
        st.blob = sub(st.blob, 1, W * (j + 1)) .. sub(st.blob, W * (j + 2) + 1)
        st.base = st.base - 1
        st.dirty = true
        return
      end
      if v < now then return end
      j = j - 1
    end
  elseif st.kind == 'count' and st.n > 0 then
    st.n = st.n - 1
    st.dirty = true
  end
end

-- Seen ids, in insertion order: `i:<id>` = its seq, the ring `q:<seq % MAX_IDS>` = the id,
-- so the id MAX_IDS inserts older is forgotten (its slot read only past MAX_IDS).
local hset = {}
local added = {}   -- ids added by this message: id -> seq
local by_seq = {}  -- seq -> id, for ids added by this message
local evicted = {} -- ids forgotten by this message
local gone = {}    -- their fields
if use_ids and ids_exp <= now then base = idseq end
local function seen(id)
  if added[id] then return 1 end
  local old = nil
  if not evicted[id] then
    local v = hvals[id_at[id]]
    old = v and tonumber(v)
    if old and old > base then return 1 end
  end
  idseq = idseq + 1
  added[id] = idseq
  by_seq[idseq] = id
  -- A stale id added again: its old ring slot must not forget it later.
  if old and old > idseq - MAX_IDS then hset['q:' .. (old % MAX_IDS)] = '' end
  local slot = 'q:' .. (idseq % MAX_IDS)
  if idseq > MAX_IDS then
    local victim = by_seq[idseq - MAX_IDS]
    if victim ~= nil then
      if added[victim] ~= idseq - MAX_IDS then victim = nil end
    elseif hset[slot] ~= '' then
      local o = redis.call('HGET', hash, slot)
      if o and o ~= '' and not added[o] then victim = o end
    end
    if victim then
      evicted[victim] = true
      added[victim] = nil
      hset['i:' .. victim] = nil
      gone[#gone + 1] = 'i:' .. victim
    end
  end
  hset['i:' .. id] = tostring(idseq)
  hset[slot] = id
  return 0
end

local out = { now }
for _, c in ipairs(calls) do
  local answer = { 0, 0 }
  if mode == 'R' then
    for _, ch in ipairs(c.checks) do refund(ch[1], ch[3]) end
  else
    local admitted = true
    for _, ch in ipairs(c.checks) do
      local passed, count, retry = evaluate(ch[1], ch[2], ch[3])
      answer[#answer + 1] = passed and 1 or 0
      answer[#answer + 1] = count
      answer[#answer + 1] = retry
      if not passed and not ch[4] then admitted = false end
    end
    if use_ids then answer[2] = seen(c.tag) end
    if mode == 'G' and c.tag ~= '1' then admitted = false end
    if admitted then
      answer[1] = 1
      for _, ch in ipairs(c.checks) do record(ch[1], ch[2], ch[3]) end
    end
  end
  out[#out + 1] = answer
end

-- Writes: the hash's fields in one HSET, each string key with its own expiry.
for _, ref in ipairs(order) do
  local st = state[ref]
  if st.dirty then
    local v
    if st.kind == 'count' then
      v = st.n .. ':' .. st.exp
    else
      v = d13(st.exp) .. sub(st.blob, W * (st.drop + 1) + 1) .. string.rep(d13(now), st.pend)
    end
    if ref < 0 then
      hset[fields[-ref]] = v
      if st.exp > hexp then hexp = st.exp end
    else
      redis.call('SET', KEYS[ref], v, 'PXAT', st.exp)
    end
  end
end
if hash then
  if use_ids and #calls > 0 then
    ids_exp = now + ttl
    if ids_exp > hexp then hexp = ids_exp end
    if #gone > 0 then chunked('HDEL', hash, gone) end
  end
  local flat = {}
  for f, v in pairs(hset) do
    flat[#flat + 1] = f
    flat[#flat + 1] = v
  end
  if #flat > 0 or use_ids then
    flat[#flat + 1] = 'n'
    flat[#flat + 1] = idseq .. ':' .. base .. ':' .. ids_exp .. ':' .. hexp
    chunked('HSET', hash, flat)
    redis.call('PEXPIREAT', hash, hexp)
  end
end
return out
