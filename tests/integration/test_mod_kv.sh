#!/usr/bin/env bash
# modules/kv.c, the JSON key-value example (built in: --module kv): PUT,
# GET, HEAD, DELETE of /kv/:key, the listing GET /kv with ?prefix= and
# ?limit=, JSON escaping of keys, and every error status with a JSON body:
# 400 (not JSON or nested too deep, bad limit, long key), 404, 405 (with Allow), 413, 415, 507;
# the module's arguments (prefix=, max_keys=, max_value=) and a refusal of
# a bad one; a store per worker, empty again after a reload.
. "$(dirname "$0")/lib.sh"

petrel_start --module kv:max_keys=3,max_value=64
J=(-H 'Content-Type: application/json')

# code METHOD PATH [CURL-ARG]...: "STATUS BODY" of a request
code() {
    local m=$1 p=$2
    shift 2
    curl_ -X "$m" -w ' %{http_code}' "$@" "$BASE$p"
}

expect_eq "$(code PUT /kv/a "${J[@]}" -d '{"x":[1,2.5e3,true,null,"s\"q"]}')" \
    '{"key":"a","bytes":32}
 201' "PUT a new key"
expect_eq "$(code GET /kv/a)" '{"x":[1,2.5e3,true,null,"s\"q"]} 200' "GET it back"
expect_eq "$(code PUT /kv/a "${J[@]}" -d ' "replaced" ')" " 204" "PUT over it"
expect_eq "$(code GET /kv/a)" ' "replaced"  200' "GET the new value, as sent"
curl_ -I "$BASE/kv/a" -o /dev/null -D "$LIB_TMP/head" 
expect_eq "$(status_of "$LIB_TMP/head")" 200 "HEAD /kv/a"
expect_eq "$(header_value "$LIB_TMP/head" content-type)" application/json "its Content-Type"
curl_ -X PUT "${J[@]}" -d 1 -o /dev/null -D "$LIB_TMP/put" "$BASE/kv/caf%C3%A9%20%22q%22"
expect_eq "$(header_value "$LIB_TMP/put" location)" '/kv/café "q"' "Location of a new key"
expect_eq "$(code GET '/kv?limit=10')" '{"count":2,"keys":["a","café \"q\""],"truncated":false}
 200' "the listing escapes keys for JSON"
expect_eq "$(code GET '/kv?limit=1')" '{"count":1,"keys":["a"],"truncated":true}
 200' "?limit=1 truncates"
expect_eq "$(code GET '/kv?prefix=caf%C3%A9')" '{"count":1,"keys":["café \"q\""],"truncated":false}
 200' "?prefix= (percent-decoded)"
expect_eq "$(code GET '/kv?prefix=zzz')" '{"count":0,"keys":[],"truncated":false}
 200' "?prefix= that matches nothing"
ok "PUT (201, then 204), GET, HEAD, Location, the listing with prefix and limit, JSON escaping"

expect_eq "$(code GET /kv/nope)" '{"error":"no such key","status":404}
 404' "GET of a missing key"
expect_eq "$(code DELETE /kv/nope)" '{"error":"no such key","status":404}
 404' "DELETE of a missing key"
expect_eq "$(code PUT /kv/b "${J[@]}" -d '{"x":}')" '{"error":"the body is not one JSON value","status":400}
 400' "PUT of broken JSON"
expect_eq "$(code PUT /kv/b "${J[@]}" -d '1 2')" '{"error":"the body is not one JSON value","status":400}
 400' "PUT of two JSON values"
expect_eq "$(code PUT /kv/b "${J[@]}" -d '')" '{"error":"the body is not one JSON value","status":400}
 400' "PUT of nothing"
expect_eq "$(code PUT /kv/b -H 'Content-Type: text/plain' -d 1)" '{"error":"the body must be application/json","status":415}
 415' "PUT of text/plain"
expect_eq "$(code PUT /kv/b -H 'Content-Type: application/json; charset=utf-8' -d 2)" \
    '{"key":"b","bytes":1}
 201' "PUT of application/json; charset=utf-8"
big=$(printf '"%070d"' 0)
expect_eq "$(code PUT /kv/c "${J[@]}" -d "$big")" '{"error":"value too large","status":413}
 413' "PUT over max_value=64"
long=$(printf 'k%.0s' {1..257})
expect_eq "$(code PUT "/kv/$long" "${J[@]}" -d 1)" '{"error":"key longer than 256 bytes","status":400}
 400' "PUT of a 257-byte key"
expect_eq "$(code GET '/kv?limit=0')" '{"error":"limit must be a number from 1 to 1000","status":400}
 400' "?limit=0"
expect_eq "$(code GET '/kv?limit=5x')" '{"error":"limit must be a number from 1 to 1000","status":400}
 400' "?limit=5x"
expect_eq "$(code PUT /kv/d "${J[@]}" -d 4)" '{"error":"the store is full","status":507}
 507' "a fourth key over max_keys=3"
expect_eq "$(code DELETE /kv/b)" " 204" "DELETE"
expect_eq "$(code PUT /kv/d "${J[@]}" -d 4)" '{"key":"d","bytes":1}
 201' "room again after a DELETE"
curl_ -X POST -o /dev/null -D "$LIB_TMP/post" "$BASE/kv/a"
expect_eq "$(status_of "$LIB_TMP/post")" 405 "POST /kv/a"
expect_eq "$(header_value "$LIB_TMP/post" allow)" "GET, HEAD, PUT, DELETE" "its Allow"
ok "errors: 404, 400 (JSON, key length, limit), 415, 413, 507, 405 with Allow"

# the store is per worker, and a reload starts a new one
kill -HUP "$PETREL_PID"
wait_for "$(bound 20)" grep -q "reload: generation 1 serving" "$PETREL_ERR"
gone() { [[ $(curl_ -o /dev/null -w '%{http_code}' "$BASE/kv/a") == 404 ]]; }
wait_for "$(bound 10)" gone
ok "after a reload the store is empty (it lives in the workers)"
petrel_stop

petrel_start --module kv:prefix=/api/v1/
expect_eq "$(code PUT /api/v1/kv/x "${J[@]}" -d 1)" '{"key":"x","bytes":1}
 201' "PUT under prefix=/api/v1/"
expect_eq "$(code GET /kv/x -o /dev/null)" " 404" "nothing at /kv"
deep=$(printf '[%.0s' {1..65})$(printf ']%.0s' {1..65})
expect_eq "$(code PUT /api/v1/kv/b "${J[@]}" -d "$deep")" '{"error":"the body is not one JSON value","status":400}
 400' "PUT of JSON nested 65 deep (more than 64)"
deep=$(printf '[%.0s' {1..64})$(printf ']%.0s' {1..64})
expect_eq "$(code PUT /api/v1/kv/b "${J[@]}" -d "$deep")" '{"key":"b","bytes":128}
 201' "PUT of JSON nested 64 deep"
petrel_stop
ok "prefix=/api/v1/ moves the routes; JSON nested deeper than 64 is refused"

rc=0
timeout "$(bound 10)" "$PETREL" --listen 127.0.0.1:0 --module kv:max_keys=lots >"$LIB_TMP/out" 2>&1 || rc=$?
[[ $rc -eq 1 ]] || fail "--module kv:max_keys=lots: status $rc"
grep -q "module 'kv': bad argument 'max_keys=lots'" "$LIB_TMP/out" &&
    grep -q "module 'kv': init failed: invalid argument" "$LIB_TMP/out" ||
    fail "--module kv:max_keys=lots: $(cat "$LIB_TMP/out")"
ok "a bad argument stops petrel with the module's message"
