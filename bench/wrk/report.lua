-- Shared by the wrk scripts: one machine-readable line at the end, with the
-- percentiles wrk measured (at saturation: wrk sends as fast as answers come).
function done(summary, latency, requests)
  local e = summary.errors
  local errors = e.connect + e.read + e.write + e.timeout
  io.write(string.format(
    "wrk: requests=%d duration_s=%.2f rps=%.1f p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f max_ms=%.3f " ..
    "socket_errors=%d non2xx=%d\n",
    summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000,
    latency.max / 1000, errors, e.status))
end
