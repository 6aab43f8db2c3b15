#!/usr/bin/env bash
# Static files (petrel --root DIR, modules/static.c) with curl: Content-Type
# of the MIME table, directories (index.html, 301 with the query kept, 404
# without an index, --autoindex), percent-encoded and UTF-8 names, empty
# files, HEAD, ETag / Last-Modified and 304, Range (206, 416, If-Range),
# precompressed .br / .gz with Vary, Cache-Control, and a second mount with
# --module static:PREFIX=DIR.
. "$(dirname "$0")/lib.sh"

T=$LIB_TMP
W=$T/www
mkdir -p "$W/sub" "$W/noindex/inner" "$W/assets"
printf '<!doctype html><p>home</p>\n' >"$W/index.html"
printf '<p>sub</p>\n' >"$W/sub/index.html"
printf 'hello static\n' >"$W/a.txt"
: >"$W/empty.txt"
for ext in html css js mjs json txt xml svg png jpg gif webp ico wasm woff2 pdf mp4 bin; do
    printf 'x' >"$W/file.$ext"
done
printf 'UTF-8 name\n' >"$W/héllo wörld.txt"
printf 'percent\n' >"$W/100%.txt"
printf 'q\n' >"$W/what?.txt"
printf 'tiny\n' >"$W/noindex/<b>&.txt"
seq 1 1000 >"$W/numbers.txt"
printf 'console.log("identity, a bit longer than the compressed ones");\n' >"$W/app.js"
printf 'BROTLI-BYTES' >"$W/app.js.br"
gzip -c -n "$W/app.js" >"$W/app.js.gz"
printf 'only gzip here\n' >"$W/style.css"
gzip -c -n "$W/style.css" >"$W/style.css.gz"
printf 'asset\n' >"$W/assets/x.txt"

# has_header FILE NAME: the head in FILE (curl -D) has a field NAME (header_value fails if not)
has_header() { tr -d '\r' <"$1" | grep -qi "^$2:"; }

petrel_start --root "$W" --module hello

# --- Content-Type -------------------------------------------------------------
declare -A want=(
    [html]='text/html; charset=utf-8' [css]='text/css; charset=utf-8'
    [js]='text/javascript; charset=utf-8' [mjs]='text/javascript; charset=utf-8'
    [json]=application/json [txt]='text/plain; charset=utf-8' [xml]='text/xml; charset=utf-8'
    [svg]=image/svg+xml [png]=image/png [jpg]=image/jpeg [gif]=image/gif [webp]=image/webp
    [ico]=image/x-icon [wasm]=application/wasm [woff2]=font/woff2 [pdf]=application/pdf
    [mp4]=video/mp4 [bin]=application/octet-stream
)
for ext in "${!want[@]}"; do
    got=$(curl_ -o /dev/null -w '%{http_code} %{content_type}' "$BASE/file.$ext")
    expect_eq "$got" "200 ${want[$ext]}" "GET /file.$ext"
done
ok "Content-Type for ${#want[@]} extensions, charset=utf-8 for text"

# --- files, HEAD, empty files, the module routes still win ----------------------
curl_ -D "$T/h" -o "$T/b" "$BASE/a.txt"
expect_eq "$(status_of "$T/h")" 200 "GET /a.txt"
cmp -s "$T/b" "$W/a.txt" || fail "GET /a.txt: body differs"
expect_eq "$(header_value "$T/h" Content-Length)" 13 "Content-Length"
expect_eq "$(header_value "$T/h" Accept-Ranges)" bytes "Accept-Ranges"
etag=$(header_value "$T/h" ETag)
lm=$(header_value "$T/h" Last-Modified)
want_etag=$(printf '"%x-%x"' "$(stat -c %Y "$W/a.txt")" "$(stat -c %s "$W/a.txt")")
expect_eq "$etag" "$want_etag" "ETag (nginx's form: hex mtime-size)"
expect_eq "$lm" "$(TZ=GMT date -d "@$(stat -c %Y "$W/a.txt")" '+%a, %d %b %Y %H:%M:%S GMT')" "Last-Modified"
if has_header "$T/h" Cache-Control; then fail "Cache-Control sent by default"; fi
expect_eq "$(curl_ -I -D "$T/h" -o /dev/null -w '%{size_download}' "$BASE/a.txt")" 0 "HEAD: no body"
expect_eq "$(status_of "$T/h")" 200 "HEAD /a.txt"
expect_eq "$(header_value "$T/h" Content-Length)" 13 "HEAD Content-Length"
curl_ -D "$T/h" -o "$T/b" "$BASE/empty.txt"
expect_eq "$(status_of "$T/h") $(header_value "$T/h" Content-Length) $(stat -c %s "$T/b")" "200 0 0" "empty file"
expect_eq "$(curl_ "$BASE/hello")" "Hello World!" "/hello (module route beside --root)"
ok "GET and HEAD of files, empty file, ETag, Last-Modified, no Cache-Control by default"

# --- names ----------------------------------------------------------------------
expect_eq "$(curl_ "$BASE/h%C3%A9llo%20w%C3%B6rld.txt")" "UTF-8 name" "UTF-8 name, percent-encoded"
expect_eq "$(curl_ "$BASE/h%c3%a9llo%20w%c3%b6rld.txt")" "UTF-8 name" "lower-case escapes"
expect_eq "$(curl_ --path-as-is "$BASE/héllo%20wörld.txt")" "UTF-8 name" "raw UTF-8 bytes"
expect_eq "$(curl_ "$BASE/100%25.txt")" percent "%25"
expect_eq "$(curl_ "$BASE/what%3F.txt")" q "%3F"
expect_eq "$(curl_ "$BASE/sub%2Findex.html")" "<p>sub</p>" "an encoded slash is a slash"
expect_eq "$(curl_ -o /dev/null -w '%{http_code}' "$BASE/a.txt?v=1")" 200 "a query is ignored"
ok "percent-encoded, UTF-8 and odd names"

# --- directories ------------------------------------------------------------------
curl_ -D "$T/h" -o "$T/b" "$BASE/"
expect_eq "$(status_of "$T/h")" 200 "GET /"
cmp -s "$T/b" "$W/index.html" || fail "GET /: not index.html"
expect_eq "$(header_value "$T/h" Content-Type)" "text/html; charset=utf-8" "index Content-Type"
curl_ -D "$T/h" -o /dev/null "$BASE/sub?x=1&y=%20"
expect_eq "$(status_of "$T/h")" 301 "GET /sub"
expect_eq "$(header_value "$T/h" Location)" "/sub/?x=1&y=%20" "Location keeps the query"
expect_eq "$(curl_ -L "$BASE/sub")" "<p>sub</p>" "following the redirect"
expect_eq "$(curl_ -o /dev/null -w '%{http_code}' "$BASE/noindex/")" 404 "directory without an index"
expect_eq "$(curl_ -o /dev/null -w '%{http_code}' "$BASE/a.txt/")" 404 "a file with a slash"
expect_eq "$(curl_ -o /dev/null -w '%{http_code}' "$BASE/nope.txt")" 404 "missing file"
expect_eq "$(curl_ -o /dev/null -w '%{http_code}' -X POST "$BASE/a.txt")" 405 "POST"
ok "directories: index.html, 301 with the query, 404 without an index"

# --- conditional requests ----------------------------------------------------------
cond() { curl_ -o "$T/b" -D "$T/h" -w '%{http_code}' "$@" "$BASE/a.txt"; }
expect_eq "$(curl_ -o /dev/null -w '%{http_code} %{size_download}' -H "If-None-Match: $etag" \
    "$BASE/a.txt")" "304 0" "If-None-Match: 304 without a body"
rm -f "$T/b"
expect_eq "$(cond -H "If-None-Match: $etag")" 304 "If-None-Match"
header_value "$T/h" ETag >/dev/null
expect_eq "$(cond -H "If-None-Match: \"x\", W/$etag")" 304 "If-None-Match, weak, in a list"
expect_eq "$(cond -H 'If-None-Match: *')" 304 "If-None-Match: *"
expect_eq "$(cond -H 'If-None-Match: "other"')" 200 "If-None-Match, another tag"
expect_eq "$(cond -H "If-Modified-Since: $lm")" 304 "If-Modified-Since"
expect_eq "$(cond -H 'If-Modified-Since: Sat, 01 Jan 2000 00:00:00 GMT')" 200 "If-Modified-Since, older"
expect_eq "$(cond -H 'If-None-Match: "other"' -H "If-Modified-Since: $lm")" 200 "If-None-Match wins over If-Modified-Since"
expect_eq "$(cond -H 'If-Match: "other"')" 412 "If-Match"
expect_eq "$(cond -H "If-Match: $etag")" 200 "If-Match, same tag"
expect_eq "$(cond -H 'If-Unmodified-Since: Sat, 01 Jan 2000 00:00:00 GMT')" 412 "If-Unmodified-Since"
ok "304 (If-None-Match, If-Modified-Since) and 412 (If-Match, If-Unmodified-Since)"

# --- ranges ------------------------------------------------------------------------
N=$W/numbers.txt
size=$(stat -c %s "$N")
range() { curl_ -o "$T/b" -D "$T/h" -w '%{http_code}' "$@" "$BASE/numbers.txt"; }
expect_eq "$(range -r 0-9)" 206 "bytes=0-9"
expect_eq "$(header_value "$T/h" Content-Range)" "bytes 0-9/$size" "Content-Range 0-9"
cmp -s "$T/b" <(head -c 10 "$N") || fail "bytes=0-9: body"
expect_eq "$(range -r 100-)" 206 "bytes=100-"
cmp -s "$T/b" <(tail -c +101 "$N") || fail "bytes=100-: body"
expect_eq "$(range -r -7)" 206 "bytes=-7"
expect_eq "$(header_value "$T/h" Content-Range)" "bytes $((size - 7))-$((size - 1))/$size" "Content-Range -7"
cmp -s "$T/b" <(tail -c 7 "$N") || fail "bytes=-7: body"
expect_eq "$(range -r 10-99999)" 206 "a last byte past the end"
expect_eq "$(stat -c %s "$T/b")" $((size - 10)) "clamped range"
expect_eq "$(range -r "$size-")" 416 "bytes=SIZE-"
expect_eq "$(header_value "$T/h" Content-Range)" "bytes */$size" "416 Content-Range"
expect_eq "$(range -r 0-1,5-6)" 200 "several ranges: the whole file"
expect_eq "$(stat -c %s "$T/b")" "$size" "several ranges: body"
expect_eq "$(range -r 5-1)" 200 "an invalid range is ignored"
expect_eq "$(range -r 0-0 -H 'If-Range: "stale"')" 200 "If-Range, another tag"
nt=$(curl_ -D - -o /dev/null "$BASE/numbers.txt" | awk 'tolower($1) == "etag:" { sub(/\r$/, ""); print $2 }')
expect_eq "$(range -r 0-0 -H "If-Range: $nt")" 206 "If-Range, same tag"
expect_eq "$(curl_ -o /dev/null -w '%{http_code}' -r 0-0 "$BASE/empty.txt")" 416 "a range of an empty file"
expect_eq "$(curl_ -I -o /dev/null -w '%{http_code}' -r 0-0 "$BASE/numbers.txt")" 200 "HEAD ignores Range"
ok "Range: a-b, a-, -n, clamped, 416, several, invalid, If-Range"

# --- precompressed ------------------------------------------------------------------
curl_ -D "$T/h" -o "$T/b" -H 'Accept-Encoding: gzip, deflate, br' "$BASE/app.js"
expect_eq "$(header_value "$T/h" Content-Encoding)" br "br preferred"
expect_eq "$(header_value "$T/h" Vary)" Accept-Encoding "Vary with br"
expect_eq "$(header_value "$T/h" Content-Type)" "text/javascript; charset=utf-8" "type of the original"
cmp -s "$T/b" "$W/app.js.br" || fail "br body"
curl_ -D "$T/h" -o "$T/b" -H 'Accept-Encoding: gzip' "$BASE/app.js"
expect_eq "$(header_value "$T/h" Content-Encoding)" gzip "gzip"
cmp -s "$T/b" "$W/app.js.gz" || fail "gzip body"
expect_eq "$(curl_ --compressed "$BASE/style.css")" "only gzip here" "curl --compressed decodes it"
curl_ -D "$T/h" -o "$T/b" -H 'Accept-Encoding: br;q=0, gzip;q=0' "$BASE/app.js"
if has_header "$T/h" Content-Encoding; then fail "q=0 honoured"; fi
cmp -s "$T/b" "$W/app.js" || fail "identity body"
curl_ -D "$T/h" -o "$T/b" "$BASE/app.js"
expect_eq "$(header_value "$T/h" Vary)" Accept-Encoding "Vary on the identity response too"
curl_ -D "$T/h" -o "$T/b" -H 'Accept-Encoding: br' "$BASE/style.css"
if has_header "$T/h" Content-Encoding; then fail "br without a .br file"; fi
curl_ -D "$T/h" -o "$T/b" -H 'Accept-Encoding: gzip' "$BASE/a.txt"
if has_header "$T/h" Vary; then fail "Vary without variants"; fi
ok "precompressed .br/.gz with Content-Encoding and Vary"
petrel_stop

# --- options: --cache-control, --autoindex, a mount by --module --------------------
# (--module takes a spec with a '/' before its first ':' for a file name:
# hence a prefix without its slashes and a directory relative to the cwd)
cd "$W"
petrel_start --root "$W" --cache-control 'public, max-age=3600' --autoindex \
    --module static:files=assets
cd "$T"
curl_ -D "$T/h" -o /dev/null "$BASE/a.txt"
expect_eq "$(header_value "$T/h" Cache-Control)" "public, max-age=3600" "--cache-control"
curl_ -D "$T/h" -o /dev/null -H "If-None-Match: $etag" "$BASE/a.txt"
expect_eq "$(status_of "$T/h") $(header_value "$T/h" Cache-Control)" "304 public, max-age=3600" "Cache-Control on 304"
curl_ -D "$T/h" -o "$T/b" "$BASE/noindex/"
expect_eq "$(status_of "$T/h")" 200 "autoindex"
expect_eq "$(header_value "$T/h" Content-Type)" "text/html; charset=utf-8" "autoindex type"
grep -qF '<a href="./%3Cb%3E&.txt">&lt;b&gt;&amp;.txt</a>' "$T/b" || fail "autoindex escaping: $(cat "$T/b")"
grep -qF '<a href="./inner/">inner/</a>' "$T/b" || fail "autoindex directory entry: $(cat "$T/b")"
grep -qF '<b>' "$T/b" && fail "autoindex: unescaped name"
expect_eq "$(curl_ "$BASE/files/x.txt")" asset "--module static:files=DIR"
curl_ -D "$T/h" -o /dev/null "$BASE/files?a=b"
expect_eq "$(status_of "$T/h") $(header_value "$T/h" Location)" "301 /files/?a=b" "the prefix without its slash"
expect_eq "$(curl_ "$BASE/sub/")" "<p>sub</p>" "index still wins over autoindex"
ok "--cache-control, --autoindex (escaped), --module static:PREFIX=DIR"
petrel_stop

# --- start-up errors ------------------------------------------------------------------
if "$PETREL" --listen 127.0.0.1:0 --root "$W/a.txt" 2>"$T/e"; then fail "--root FILE accepted"; fi
grep -q -- "--root" "$T/e" || fail "--root error message: $(cat "$T/e")"
if "$PETREL" --listen 127.0.0.1:0 --root "$W" --static-cache-size lots 2>"$T/e"; then fail "bad size accepted"; fi
ok "--root of a file and a bad --static-cache-size are refused"
