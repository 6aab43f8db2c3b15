#!/usr/bin/env bash
# bootstrap's package sets (`./bootstrap --list`): the build set holds only
# what building and running petrel need (no test tool, no CI tool), the
# test set what the tests use, the ci set what .ci/run adds; each package
# is in one set only, and each is a package this machine's apt knows
# (apt-cache, from its local package lists: no network).  And the options:
# --list of an unknown set is a usage error, and .ci/run installs every set
# (--ci, with the deb set of the Debian packages' build); debian/control's
# Build-Depends are the build set with libpq-dev and check.
. "$(dirname "$0")/lib.sh"

bs=$top_srcdir/bootstrap
[[ -x $bs ]] || skip "no executable $bs"

list() { "$bs" --list "$@" | awk '{ print $2 }'; }
build=" $(list build | tr '\n' ' ') "
test_=" $(list test | tr '\n' ' ') "
ci=" $(list ci | tr '\n' ' ') "
deb=" $(list deb | tr '\n' ' ') "
all=$("$bs" --list | awk '{ print $2 }')

for p in gcc build-essential libnghttp2-dev libwslay-dev node-llhttp zlib1g-dev pkg-config libhiredis-dev; do
    [[ $p == gcc || $build == *" $p "* ]] || fail "the build set lacks $p"
done
for p in check chromium wrk nghttp2-client python3-websockets clang valgrind gnuplot-nox \
    libclang-rt-14-dev nodejs npm redis-server; do
    [[ $build != *" $p "* ]] || fail "the build set (the README's run command) installs $p"
done
for p in check chromium wrk nghttp2-client nghttp2-server python3-websockets python3-h2 python3-grpcio \
    redis-server; do
    [[ $test_ == *" $p "* ]] || fail "the test set lacks $p"
done
for p in clang valgrind gnuplot-nox; do
    [[ $ci == *" $p "* ]] || fail "the ci set lacks $p"
done
for p in dpkg-dev debhelper lintian fakeroot; do
    [[ $deb == *" $p "* ]] || fail "the deb set lacks $p"
done
grep -q '^    --ci) sets=(build test ci deb) ;;$' "$bs" || fail "bootstrap --ci does not install the deb set"
# debian/control's Build-Depends: the build set's libraries and tools, and
# from the test set libpq-dev (the pool) and check (the unit suites)
control=$top_srcdir/debian/control
[[ -f $control ]] || fail "no $control"
bdeps=$(sed -n '/^Build-Depends:/,/^[A-Z]/p' "$control" | sed -e 's/^Build-Depends://' -e '/^[A-Z]/d' |
    tr ',' '\n' | sed -e 's/[(<].*//' -e 's/[[:space:]]//g' | grep -v '^$')
for p in $bdeps; do
    [[ $p == debhelper-compat || $build == *" $p "* || $p == libpq-dev || $p == check ]] ||
        fail "debian/control's Build-Depends has $p, which no set of bootstrap installs for it"
done
for p in $build; do
    [[ $p == build-essential || $p == curl || " $(tr '\n' ' ' <<<"$bdeps") " == *" $p "* ]] ||
        fail "debian/control's Build-Depends lacks $p of the build set"
done
ok "debian/control's Build-Depends: the build set (but build-essential, implied, and curl, for the README) with libpq-dev and check; the deb set: $(wc -w <<<"$deb") packages"

dups=$(sort <<<"$all" | uniq -d | tr '\n' ' ')
[[ -z $dups ]] || fail "packages listed in more than one set: $dups"
ok "bootstrap --list: build $(wc -w <<<"$build"), test $(wc -w <<<"$test_"), ci $(wc -w <<<"$ci") packages, none twice; no test or CI tool in the build set"

rc=0
"$bs" --list nosuchset >/dev/null 2>"$LIB_TMP/err" || rc=$?
[[ $rc -eq 2 ]] && grep -q "no set 'nosuchset'" "$LIB_TMP/err" ||
    fail "bootstrap --list nosuchset: status $rc, $(cat "$LIB_TMP/err")"
grep -q '^\./bootstrap --ci$' "$top_srcdir/.ci/run" || fail ".ci/run does not run ./bootstrap --ci"
ok "bootstrap --list of an unknown set: status 2; .ci/run installs every set"

if command -v apt-cache >/dev/null && [[ -n $(apt-cache policy 2>/dev/null | head -n 3) ]]; then
    # one apt-cache for them all: it shows those it knows (and is silent
    # about the others when it knows one)
    # shellcheck disable=SC2086 # a word list
    known=" $(apt-cache show $all 2>/dev/null | sed -n 's/^Package: //p' | sort -u | tr '\n' ' ') "
    unknown=()
    for p in $all; do
        [[ $known == *" $p "* ]] || unknown+=("$p")
    done
    ((${#unknown[@]} == 0)) || fail "packages apt does not know: ${unknown[*]}"
    ok "apt knows every package of the sets"
fi
