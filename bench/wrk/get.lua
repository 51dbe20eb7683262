-- GET of the URL given to wrk, as fast as the connections allow.
dofile(os.getenv("BENCH_DIR") .. "/wrk/report.lua")
