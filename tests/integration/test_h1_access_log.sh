#!/usr/bin/env bash
# --access-log FILE: one combined-format line per response, written at least
# once a second and at exit; '"', '\' and control bytes from the client are
# escaped (\xHH) so that a client cannot forge or break log lines; nothing
# but the request's own bytes gets into its line.  --access-log - writes to
# standard output; two workers append whole lines to the same file.
. "$(dirname "$0")/lib.sh"

T=$LIB_TMP
LOG=$T/access.log
failures=()
not_ok() {
    printf 'not ok - %s\n' "$*"
    failures+=("$*")
}

DATE='\[[0-3][0-9]/(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)/[0-9]{4}:[0-2][0-9]:[0-5][0-9]:[0-6][0-9] [+-][0-9]{4}\]'
# the shape of every line: no unescaped '"' inside a quoted field
LINE="^127\\.0\\.0\\.1 - - $DATE \"[^\"]*\" [1-5][0-9]{2} [0-9]+ \"[^\"]*\" \"[^\"]*\"\$"

petrel_start --module hello --module echo --access-log "$LOG"
CURL_UA="curl/$(curl --version | sed -n '1s/^curl \([^ ]*\).*/\1/p')"

# --- flushed at least once a second, with the server idle -----------------
# Three requests 0.2 s apart, then nothing: within 2.5 s all three lines must
# be in the file (whether or not a second boundary fell between them).
for i in 1 2 3; do
    curl_ -o /dev/null "$BASE/hello"
    [[ $i -eq 3 ]] || sleep 0.2
done
t0=$(now)
has_lines() { [[ -s $LOG && $(wc -l <"$LOG") -ge $1 ]]; }
until has_lines 3; do
    fcmp "$(secs_since "$t0") < $(bound 2.5)" || break
    sleep 0.05
done
if has_lines 3; then
    ok "the lines of 3 requests reached the file $(secs_since "$t0")s after the last, with the server idle"
else
    not_ok "access log: $(wc -l <"$LOG") of 3 lines written $(bound 2.5)s after the last request," \
        "with the server idle (the log must be flushed at least once a second)"
fi

# --- a variety of requests ---------------------------------------------------
curl_ -o /dev/null -d hello "$BASE/echo"
curl_ -o /dev/null -I "$BASE/hello"
curl_ -o /dev/null "$BASE/nosuch"
curl_ -o /dev/null -e 'http://ref.example/a"b' -A 'agent "q" \ z' "$BASE/hello"
pyrun <<'EOF'
from petrel_client import *

def send(data):
    c = Conn()
    c.send(data)
    r = c.read_response()
    c.close()
    return r

check(send(b"GET /hello HTTP/1.0\r\n\r\n").status == 200, "HTTP/1.0 GET")
# a '"' in the target: accepted by the parser, must be escaped in the log
check(send(b'GET /hello?x="y" HTTP/1.1\r\nHost: x\r\n\r\n').status == 200, 'GET with " in the query')
# a control byte in the target: 400, and the log must still escape it
check(send(b"GET /a\x01b HTTP/1.1\r\nHost: x\r\n\r\n").status == 400, "control byte in the target")
# A request whose head is cut short by an invalid byte in User-Agent, on a
# read buffer that held another request before: its line must not show
# bytes of that earlier request (a header value of a failed head is not
# NUL-terminated).
check(send(b"GET /hello HTTP/1.1\r\nHost: x\r\nX-Pad-Field: " + b"STALE" * 200 + b"\r\n\r\n").status == 200,
      "request with padding")
check(send(b"GET /hello HTTP/1.1\r\nHost: x\r\nUser-Agent: a\x01b\r\n\r\n").status == 400,
      "control byte in User-Agent")
EOF
nreq=12  # requests so far, each one line (the wait_port probe sends none)

petrel_stop
ok "SIGTERM: exit status 0"

# --- the lines, after exit ---------------------------------------------------
n=$(wc -l <"$LOG")
[[ $n -eq $nreq ]] || not_ok "$n lines in the access log, want $nreq: $(cut -c1-300 "$LOG" | cat -v)"
if grep -naP '[\x00-\x08\x0b-\x1f\x7f]' "$LOG" >/dev/null; then
    not_ok "raw control bytes in the access log: $(grep -naP '[\x00-\x08\x0b-\x1f\x7f]' "$LOG" | cut -c1-300 | cat -v)"
fi
lineno=0
while IFS= read -r line; do
    lineno=$((lineno + 1))
    [[ $line =~ $LINE ]] || not_ok "line $lineno is not in the combined format: $(cut -c1-300 <<<"$line" | cat -v)"
done <"$LOG"

# expect_line N ERE WHAT: line N of the log matches ERE (after the date).
expect_line() {
    local line
    line=$(sed -n "$1p" "$LOG")
    if [[ $line =~ ^127\.0\.0\.1\ -\ -\ $DATE\ (.*)$ && ${BASH_REMATCH[2]} =~ $2 ]]; then
        ok "$3: $(cat -v <<<"$line")"
    else
        not_ok "$3: line $1 is $(cut -c1-300 <<<"$line" | cat -v)..., want .../$2/"
    fi
}
q() { sed 's/[].[^$()*+?{}|\\]/\\&/g' <<<"$1"; }  # ERE-quote
expect_line 1 "^$(q "\"GET /hello HTTP/1.1\" 200 12 \"-\" \"$CURL_UA\"")\$" "curl GET /hello"
expect_line 4 "^$(q "\"POST /echo HTTP/1.1\" 200 5 \"-\" \"$CURL_UA\"")\$" "curl POST /echo"
expect_line 5 "^$(q "\"HEAD /hello HTTP/1.1\" 200 0 \"-\" \"$CURL_UA\"")\$" "curl HEAD /hello (no body bytes)"
expect_line 6 "^$(q "\"GET /nosuch HTTP/1.1\" 404 ")[0-9]+ $(q "\"-\" \"$CURL_UA\"")\$" "curl GET /nosuch"
expect_line 7 "^$(q '"GET /hello HTTP/1.1" 200 12 "http://ref.example/a\x22b" "agent \x22q\x22 \x5c z"')\$" \
    "Referer and User-Agent with '\"' and '\\' escaped"
expect_line 8 "^$(q '"GET /hello HTTP/1.0" 200 12 "-" "-"')\$" "HTTP/1.0 request"
expect_line 9 "^$(q '"GET /hello?x=\x22y\x22 HTTP/1.1" 200 12 "-" "-"')\$" "'\"' in the target escaped"
expect_line 10 "^$(q '"GET /a\x01b HTTP/1.1" 400 ')[0-9]+ $(q '"-" "-"')\$" \
    "a control byte in a rejected target is logged escaped"
expect_line 12 "^$(q '"GET /hello HTTP/1.1" 400 ')[0-9]+ $(q '"-" "')(-|a|a\\x01b?)\"\$" \
    "a rejected User-Agent shows no bytes beyond its own"
if grep -q STALE "$LOG"; then
    not_ok "bytes of an earlier request leaked into the access log: $(grep STALE "$LOG" | cut -c1-200 | cat -v)"
fi

# --- --access-log - ---------------------------------------------------------
petrel_start --module hello --access-log -
curl_ -o /dev/null "$BASE/hello"
petrel_stop
out=$(cat "$PETREL_OUT")
if [[ $out =~ ^127\.0\.0\.1\ -\ -\ $DATE\ \"GET\ /hello\ HTTP/1\.1\"\ 200\ 12\ \"-\"\ \"curl/ ]] &&
    [[ $(wc -l <<<"$out") -eq 1 ]]; then
    ok "--access-log - writes the line to standard output"
else
    not_ok "--access-log -: standard output is '$out'"
fi

# --- two workers, one file ---------------------------------------------------
: >"$LOG"
petrel_start --module hello --module echo --workers 2 --access-log "$LOG"
pyrun <<'EOF'
from petrel_client import *
for i in range(1000):
    c = Conn()
    c.send(request("GET", "/hello?n=%d" % i))
    check(c.read_response().status == 200, "request %d" % i)
    c.close()
EOF
petrel_stop
n=$(wc -l <"$LOG")
bad=$(grep -cvE "$LINE" "$LOG" || true)
uniq_=$(sed -n 's/.*"GET \/hello?n=\([0-9]*\) HTTP.*/\1/p' "$LOG" | sort -un | wc -l)
if [[ $n -eq 1000 && $bad -eq 0 && $uniq_ -eq 1000 ]]; then
    ok "2 workers, 1000 requests on new connections: 1000 whole lines, each request once"
else
    not_ok "2 workers, 1000 requests: $n lines, $bad malformed, $uniq_ distinct requests"
fi

if [[ ${#failures[@]} -gt 0 ]]; then
    printf '%s\n' "${#failures[@]} access-log checks failed:" "${failures[@]/#/  }" >&2
    exit 1
fi
