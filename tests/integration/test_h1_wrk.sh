#!/usr/bin/env bash
# Load with wrk: 100 keep-alive connections for 3 s on GET /hello, then
# shorter runs that check every response (status and body) with a Lua
# script, for GET /hello and POST /echo.  No socket errors, no non-2xx
# response, no worker death.
. "$(dirname "$0")/lib.sh"

command -v wrk >/dev/null || skip "wrk is not installed (bootstrap installs it)"

petrel_start --module hello --module echo
workers=$(petrel_workers)
T=$LIB_TMP

# check_wrk FILE WHAT: wrk's report in FILE shows requests, no socket error
# and no "Non-2xx or 3xx responses" line.
check_wrk() {
    local f=$1 what=$2 n
    n=$(sed -n 's/^ *\([0-9][0-9]*\) requests in .*/\1/p' "$f")
    [[ -n $n && $n -gt 0 ]] || fail "$what: no requests completed: $(cat "$f")"
    if grep -q 'Socket errors' "$f"; then
        fail "$what: $(grep 'Socket errors' "$f" | sed 's/^ *//')"
    fi
    if grep -q 'Non-2xx' "$f"; then
        fail "$what: $(grep 'Non-2xx' "$f" | sed 's/^ *//')"
    fi
    echo "$n"
}

timeout "$(bound 30)" wrk -t1 -c100 -d3s "$BASE/hello" >"$T/wrk1" 2>&1 || fail "wrk failed: $(cat "$T/wrk1")"
n=$(check_wrk "$T/wrk1" "wrk -t1 -c100 -d3s /hello")
ok "wrk -t1 -c100 -d3s /hello: $n requests, 0 socket errors, no non-2xx ($(grep Requests/sec "$T/wrk1"))"

# Every response checked: status 200 and the exact body.
cat >"$T/check.lua" <<'EOF'
-- response() runs in each thread's Lua state, done() in the main one:
-- counts are globals of the threads, read back through setup()'s handles.
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) seen = 0; bad = 0; first = "" end
function response(status, headers, body)
    seen = seen + 1
    if status ~= 200 or body ~= want then
        bad = bad + 1
        if first == "" then first = status .. " " .. tostring(body) end
    end
end
function done(summary, latency, requests)
    local s, b, f = 0, 0, ""
    for _, t in ipairs(threads) do
        s = s + t:get("seen"); b = b + t:get("bad")
        if f == "" then f = t:get("first") end
    end
    io.write(string.format("checked %d responses, %d bad%s\n", s, b,
                           f ~= "" and (" (first: " .. f .. ")") or ""))
end
EOF
{ echo 'want = "Hello World!"'; cat "$T/check.lua"; } >"$T/hello.lua"
{
    echo 'want = string.rep("0123456789abcdef", 64)'
    echo 'wrk.method = "POST"; wrk.body = want'
    echo 'wrk.headers["Content-Type"] = "application/octet-stream"'
    cat "$T/check.lua"
} >"$T/echo.lua"

for run in "hello /hello" "echo /echo" "echo /api/benchmark/echo"; do
    # shellcheck disable=SC2086 # split "module path"
    set -- $run
    timeout "$(bound 30)" wrk -t1 -c20 -d1s -s "$T/$1.lua" "$BASE$2" >"$T/wrk2" 2>&1 ||
        fail "wrk -s $1.lua failed: $(cat "$T/wrk2")"
    n=$(check_wrk "$T/wrk2" "wrk -c20 -d1s $2 (checked)")
    line=$(grep '^checked ' "$T/wrk2") || fail "the Lua script did not report: $(cat "$T/wrk2")"
    expect_match "$line" '^checked [1-9][0-9]* responses, 0 bad$' "wrk $2 response check"
    ok "wrk -c20 -d1s $2: $n requests, every status and body right"
done

expect_eq "$(petrel_workers | tr '\n' ' ')" "$(echo "$workers" | tr '\n' ' ')" "worker pids after the load"
ok "the worker survived the load"
petrel_stop
ok "SIGTERM: exit status 0"
