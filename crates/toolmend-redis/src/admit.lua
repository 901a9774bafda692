-- toolmend guard admission, script version 2 (keys under tm:v2:), lean form: what the
-- Rust side can precompute it passes (the hash's field names, ids included, each call's
-- id field), so the script builds no name, parses no list twice, makes few tables (Lua
-- allocation in Redis costs about 100 ns a table, 250 ns a closure, 150 ns a number
-- conversion on the reference machine) and answers one flat array.
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
-- calls the global part refused (tag unused, ARGV[2] the time the 'S' call recorded them;
-- no TIME).
-- ARGV[2]: the session TTL in ms (mode R: the time to refund); ARGV[3]: '1' with a hash;
-- ARGV[4]: nh, the hash fields to read: `n`, then the scoped fields, then the ids' fields
-- `i:<id>` (each id once; modes A and S), at ARGV[6 .. 5 + nh]; ARGV[5]: nf, the scoped
-- fields among them (ARGV[7 .. 6 + nf]: field k is ARGV[6 + k], read at index k + 1).
-- Then three values per call: its id field's index among the nh ('0': none), its tag (the
-- call id in A and S), its checks as "ref,limit,window,shadow;" (ref > 0 a KEYS index,
-- ref < 0 the field -ref; window -1 for a budget; shadow 0 or 1).
-- A window is "<expiry ms><time ms>..." (13 digits each, oldest first, at most `limit`
-- times); a budget "<count>:<expiry ms>".
-- Returns one flat array: now, then per call admitted, id_seen and, per check carried,
-- passed, count, retry.
local A = ARGV
local mode = A[1]
local now
local ttl = A[2] + 0
if mode == 'R' then
  now = ttl
else
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
end
local hashed = A[3] == '1'
local hash = hashed and KEYS[1] or nil
local nh = A[4] + 0
local nf = A[5] + 0
local MAX_IDS = 10000
local W = 13
local sub, find, fmt, unpack = string.sub, string.find, string.format, unpack
local now13 = fmt('%013.0f', now)

-- Lua's unpack has a bound: past CHUNK arguments, a command goes in chunks (the replies
-- of a reading command concatenated). Only messages of hundreds of calls get there.
local CHUNK = 1000
local function chunked(cmd, key, list, from, to)
  local out = {}
  for a = from, to, CHUNK do
    local b = a + CHUNK - 1
    if b > to then b = to end
    local r
    if key then r = redis.call(cmd, key, unpack(list, a, b)) else r = redis.call(cmd, unpack(list, a, b)) end
    if type(r) == 'table' then
      for j = 1, #r do out[#out + 1] = r[j] end
    end
  end
  return out
end

-- One read of the hash (header, fields, ids) and one of the string keys.
local use_ids = hashed and (mode == 'A' or mode == 'S')
local hvals
if hashed then
  local r
  if nh <= CHUNK then
    r = redis.pcall('HMGET', hash, unpack(A, 6, 5 + nh))
  else
    r = redis.pcall('TYPE', hash)
    if r.ok == 'hash' or r.ok == 'none' then r = chunked('HMGET', hash, A, 6, 5 + nh) end
  end
  if r.err ~= nil or r.ok ~= nil then
    -- Another kind of value under the session's key (not ours): start over.
    redis.call('DEL', hash)
    hvals = {}
  else
    hvals = r
  end
else
  hvals = {}
end
local off = hashed and 1 or 0
local nk = #KEYS
local svals
if nk > off then
  if nk - off <= CHUNK then
    svals = redis.call('MGET', unpack(KEYS, off + 1, nk))
  else
    svals = chunked('MGET', nil, KEYS, off + 1, nk)
  end
end

-- The header: "<id seq>:<base>:<ids expiry>:<hash expiry>". Ids with a seq at or below
-- `base` expired with the session's TTL.
local idseq, base, ids_exp, hexp = 0, 0, 0, 0
local head = hvals[1]
if head then
  local a, b, c, d = string.match(head, '^(%d+):(%d+):(%d+):(%d+)$')
  if a then idseq, base, ids_exp, hexp = a + 0, b + 0, c + 0, d + 0 end
end

-- A model of each key or field, read once, written once at the end:
-- { kind, blob, base, drop, pend, exp, n, dirty } with kind 1 a window (`blob`, `base`
-- entries, `drop` left from the front, `pend` new at now), 2 a budget (`n`), 0 none.
local state = {}
local order = {}
local norder = 0
local function get(ref)
  local raw
  if ref < 0 then raw = hvals[1 - ref] else raw = svals[ref - off] end
  local st
  if not raw then
    st = { 0, false, 0, 0, 0, 0, 0, false }
  elseif find(raw, ':', 1, true) then
    local n, exp = string.match(raw, '^(%d+):(%d+)$')
    -- A counter whose expiry is now or past counts as gone (as in the memory store).
    if n and exp + 0 > now then
      st = { 2, false, 0, 0, 0, exp + 0, n + 0, false }
    else
      st = { 0, false, 0, 0, 0, 0, 0, false }
    end
  else
    local len = #raw
    local exp = len >= W and len % W == 0 and tonumber(sub(raw, 1, W))
    if exp and exp > now then
      st = { 1, raw, len / W - 1, 0, 0, exp, 0, false }
    else
      st = { 0, false, 0, 0, 0, 0, 0, false }
    end
  end
  state[ref] = st
  norder = norder + 1
  order[norder] = ref
  return st
end

-- Seen ids, in insertion order: `i:<id>` = its seq, the ring `q:<seq % MAX_IDS>` = the id,
-- so the id MAX_IDS inserts older is forgotten (its slot read only past MAX_IDS).
local hset = {}
local added = {}   -- ids added by this message: id -> seq, and seq -> id
local evicted = nil -- ids forgotten by this message (id -> true), rare
local gone = nil    -- their fields
if use_ids and ids_exp <= now then base = idseq end

local out = { now }
local o = 1
local rec = {}
local i = 6 + nh
local last = #A
while i + 2 <= last do
  local idpos, tag, spec = A[i], A[i + 1], A[i + 2]
  i = i + 3
  if mode == 'R' then
    for r, w in string.gmatch(spec, '(%-?%d+),%d+,(%-?%d+),%d;') do
      r, w = r + 0, w + 0
      local st = state[r] or get(r)
      if w >= 0 then
        if st[1] == 1 then
          local j = st[3] - 1
          local blob = st[2]
          while j >= 0 do
            local v = sub(blob, W * (j + 1) + 1, W * (j + 2)) + 0
            if v == now then
              st[2] = sub(blob, 1, W * (j + 1)) .. sub(blob, W * (j + 2) + 1)
              st[3] = st[3] - 1
              st[8] = true
              break
            end
            if v < now then break end
            j = j - 1
          end
        end
      elseif st[1] == 2 and st[7] > 0 then
        st[7] = st[7] - 1
        st[8] = true
      end
    end
    out[o + 1] = 0
    out[o + 2] = 0
    o = o + 2
  else
    local at = o
    o = o + 2
    local admitted = true
    -- Evaluate every check; keep what recording needs (ref, limit, window) in `rec`.
    local nrec = 0
    for r, l, w, s in string.gmatch(spec, '(%-?%d+),(%d+),(%-?%d+),(%d);') do
      r, l, w = r + 0, l + 0, w + 0
      local st = state[r] or get(r)
      local passed, count, retry = l > 0, 0, 0
      if w >= 0 then
        if st[1] == 1 then
          local from = now - w
          -- Entries at or before `from` leave (the times are in order: the oldest left
          -- first, then a binary search).
          local lo, hi = st[4], st[3]
          local blob = st[2]
          if lo < hi and sub(blob, W * (lo + 1) + 1, W * (lo + 2)) + 0 <= from then
            lo = lo + 1
            while lo < hi do
              local mid = math.floor((lo + hi) / 2)
              if sub(blob, W * (mid + 1) + 1, W * (mid + 2)) + 0 > from then hi = mid else lo = mid + 1 end
            end
          end
          st[4] = lo
          local left = st[3] - lo
          if left == 0 and now <= from then st[5] = 0 end
          count = left + st[5]
          if count > 0 then
            if count < l then
              passed = true
            else
              passed = false
              -- The oldest admission that must leave the window before one more fits.
              if l > 0 then
                local j = count - l
                local e = now
                if j < left then e = sub(blob, W * (lo + j + 1) + 1, W * (lo + j + 2)) + 0 end
                retry = e + w - now
                if retry < 0 then retry = 0 end
              end
            end
          end
        end
      elseif st[1] == 2 then
        count = st[7]
        if count < l then
          passed = true
        else
          passed = false
          retry = st[6] - now
          if retry < 0 then retry = 0 end
        end
      end
      out[o + 1] = passed and 1 or 0
      out[o + 2] = count
      out[o + 3] = retry
      o = o + 3
      if not passed and s == '0' then admitted = false end
      rec[nrec + 1] = st
      rec[nrec + 2] = l
      rec[nrec + 3] = w
      nrec = nrec + 3
    end
    local seen = 0
    if use_ids then
      if added[tag] then
        seen = 1
      else
        local old = nil
        if not (evicted and evicted[tag]) then
          local v = hvals[idpos + 0]
          old = v and tonumber(v)
          if old and old > base then seen = 1 end
        end
        if seen == 0 then
          idseq = idseq + 1
          added[tag] = idseq
          added[idseq] = tag
          -- A stale id added again: its old ring slot must not forget it later.
          if old and old > idseq - MAX_IDS then hset['q:' .. (old % MAX_IDS)] = '' end
          local slot = 'q:' .. (idseq % MAX_IDS)
          if idseq > MAX_IDS then
            local victim = added[idseq - MAX_IDS]
            if victim ~= nil then
              if added[victim] ~= idseq - MAX_IDS then victim = nil end
            elseif hset[slot] ~= '' then
              local ov = redis.call('HGET', hash, slot)
              if ov and ov ~= '' and not added[ov] then victim = ov end
            end
            if victim then
              if not evicted then evicted, gone = {}, {} end
              evicted[victim] = true
              added[victim] = nil
              hset['i:' .. victim] = nil
              gone[#gone + 1] = 'i:' .. victim
            end
          end
          hset[A[5 + idpos]] = idseq
          hset[slot] = tag
        end
      end
    end
    out[at + 2] = seen
    if mode == 'G' and tag ~= '1' then admitted = false end
    if admitted then
      out[at + 1] = 1
      -- Record in every check.
      for k = 1, nrec, 3 do
        local st, l, w = rec[k], rec[k + 1], rec[k + 2]
        st[8] = true
        if w >= 0 then
          if st[1] ~= 1 then
            st[1], st[2], st[3], st[4], st[5] = 1, '', 0, 0, 0
          end
          local pend = st[5] + 1
          -- A shadow rule admits past its limit: the log stays bounded by the limit.
          local over = st[3] - st[4] + pend - (l > 1 and l or 1)
          if over > 0 then
            local from_blob = st[3] - st[4]
            if over < from_blob then from_blob = over end
            st[4] = st[4] + from_blob
            pend = pend - (over - from_blob)
          end
          st[5] = pend
          st[6] = now + w
        else
          if st[1] ~= 2 then st[1], st[7] = 2, 0 end
          st[7] = st[7] + 1
          st[6] = now + ttl
        end
      end
    else
      out[at + 1] = 0
    end
  end
end

-- Writes: the hash's fields in one HSET, each string key with its own expiry.
for k = 1, norder do
  local ref = order[k]
  local st = state[ref]
  if st[8] then
    local v
    local exp = st[6]
    if st[1] == 2 then
      v = st[7] .. ':' .. exp
    else
      local pend = st[5]
      local tail = ''
      if pend == 1 then tail = now13 elseif pend > 1 then tail = string.rep(now13, pend) end
      v = fmt('%013.0f', exp) .. sub(st[2], W * (st[4] + 1) + 1) .. tail
    end
    if ref < 0 then
      hset[A[6 - ref]] = v
      if exp > hexp then hexp = exp end
    else
      redis.call('SET', KEYS[ref], v, 'PXAT', exp)
    end
  end
end
if hashed then
  local n = i > 6 + nh
  if use_ids and n then
    ids_exp = now + ttl
    if ids_exp > hexp then hexp = ids_exp end
    if gone then chunked('HDEL', hash, gone, 1, #gone) end
  end
  local flat = {}
  local nfl = 0
  for f, v in pairs(hset) do
    flat[nfl + 1] = f
    flat[nfl + 2] = v
    nfl = nfl + 2
  end
  if nfl > 0 or use_ids then
    flat[nfl + 1] = 'n'
    flat[nfl + 2] = idseq .. ':' .. base .. ':' .. ids_exp .. ':' .. hexp
    nfl = nfl + 2
    if nfl <= CHUNK then
      redis.call('HSET', hash, unpack(flat, 1, nfl))
    else
      chunked('HSET', hash, flat, 1, nfl)
    end
    redis.call('PEXPIREAT', hash, hexp)
  end
end
return out
