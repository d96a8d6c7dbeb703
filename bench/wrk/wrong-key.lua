-- wrk script: the chat request with a key the proxy does not know (BENCH_KEYS). Every response must be 401:
-- response() counts 401 and anything else per thread; done() sums the threads' counters (thread:get), so the check is
-- exact (status_401 == requests and status_other == 0), not inferred from wrk's "Non-2xx" summary.
local body = '{"model":"stub-model","messages":[{"role":"user","content":"Guess a five-letter word."}],"max_tokens":16}'
local threads = {}
local reqs = {}
local n = 0
local i = 0

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  s401 = 0
  other = 0
  for key in string.gmatch(os.getenv("BENCH_KEYS") or "", "%S+") do
    n = n + 1
    reqs[n] = wrk.format("POST", "/v1/chat/completions",
      { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. key }, body)
  end
  if n == 0 then
    n = 1
    reqs[1] = wrk.format("POST", "/v1/chat/completions", { ["Content-Type"] = "application/json" }, body)
  end
end

function request()
  i = i % n + 1
  return reqs[i]
end

function response(status, headers, body)
  if status == 401 then s401 = s401 + 1 else other = other + 1 end
end

function done(summary, latency, requests)
  local a, o = 0, 0
  for _, t in ipairs(threads) do
    a = a + t:get("s401")
    o = o + t:get("other")
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"duration_us":%d,"bytes":%d,"connect_errors":%d,"read_errors":%d,"write_errors":%d,' ..
    '"status_errors":%d,"timeouts":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"mean_us":%.1f,"max_us":%d,"status_401":%d,"status_other":%d}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.mean, latency.max, a, o))
end
