-- wrk script: POST /v1/chat/completions with a JSON body and "Authorization: Bearer <key>".
-- Keys come from the environment (BENCH_KEYS, space separated, never on the command line); requests rotate over them
-- so no single key exceeds the proxy's per-key rate limit. The same script loads the stub directly and the proxy.
-- done() prints one line "BENCH_JSON {...}" (latencies in microseconds) that bench/lib.ts parses.
local body = '{"model":"stub-model","messages":[{"role":"user","content":"Guess a five-letter word."}],"max_tokens":16}'
local reqs = {}
local n = 0
local i = 0

function init(args)
  for key in string.gmatch(os.getenv("BENCH_KEYS") or "", "%S+") do
    n = n + 1
    reqs[n] = wrk.format("POST", "/v1/chat/completions",
      { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. key }, body)
  end
  if n == 0 then
    n = 1
    reqs[1] = wrk.format("POST", "/v1/chat/completions", { ["Content-Type"] = "application/json" }, body)
  end
  -- Threads start at different keys.
  i = math.random(n) - 1
end

function request()
  i = i % n + 1
  return reqs[i]
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"duration_us":%d,"bytes":%d,"connect_errors":%d,"read_errors":%d,"write_errors":%d,' ..
    '"status_errors":%d,"timeouts":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"mean_us":%.1f,"max_us":%d}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.mean, latency.max))
end
