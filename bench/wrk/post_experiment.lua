-- POST /experiments with a new id each time (prefix from WRK_ID_PREFIX and
-- the wrk thread number), a spec read from WRK_SPEC (JSON with "id" to be
-- replaced). Every request is a real submission to Slurm. Each wrk thread
-- stops after WRK_MAX_PER_THREAD answers (default: no limit), so a run
-- creates a known number of experiments.
dofile(os.getenv("BENCH_DIR") .. "/wrk/report.lua")

local spec = io.open(os.getenv("WRK_SPEC")):read("*a")
local prefix = os.getenv("WRK_ID_PREFIX") or "wrk"
local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

function init(args)
  counter = 0
  answers = 0
  max_answers = tonumber(os.getenv("WRK_MAX_PER_THREAD") or "0")
end

function response(status, headers, body)
  answers = answers + 1
  if max_answers > 0 and answers >= max_answers then wrk.thread:stop() end
end

function request()
  counter = counter + 1
  local id = string.format("%s-t%d-%d", prefix, tid, counter)
  local body = spec:gsub('"id"%s*:%s*"[^"]*"', '"id": "' .. id .. '"', 1)
  -- wrk.format uses the given headers instead of wrk.headers (-H ...).
  local headers = {["Content-Type"] = "application/json"}
  for k, v in pairs(wrk.headers) do headers[k] = v end
  return wrk.format("POST", "/experiments", headers, body)
end
