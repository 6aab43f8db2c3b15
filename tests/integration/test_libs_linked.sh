#!/usr/bin/env bash
# What the built libraries link and export (readelf -d, nm -D):
#  - libpetrel.so needs exactly libnghttp2, libwslay, libz and the C
#    library: none of the optional libraries' third-party libraries (libpq,
#    hiredis), which their own libraries link (libpetrel-pg, libpetrel-redis);
#    tolerated besides: parts of the C library (libm, libdl, libpthread),
#    the sanitizers' runtimes, and libllhttp when configure took the
#    system's;
#  - libpetrel.so exports none of the optional libraries' calls
#    (petrel_pg_*, petrel_static_*, petrel_redis_*);
#  - the petrel command has the PostgreSQL pool and exports it to the
#    modules it loads (petrel_pg_* in its dynamic symbols), and needs libpq
#    when the pool was built on it;
#  - petrel.pc requires no libpq (no -I of PostgreSQL's headers in every
#    module's flags); petrel-pg.pc does, when the pool is built on libpq.
. "$(dirname "$0")/lib.sh"

command -v readelf >/dev/null || skip "no readelf (apt-get install binutils)"
command -v nm >/dev/null || skip "no nm (apt-get install binutils)"
[[ -n ${top_builddir:-} && -f $top_builddir/Makefile ]] || skip "no build tree (top_builddir is not set)"
lib=$top_builddir/src/.libs/libpetrel.so
[[ -f $lib ]] || skip "no $lib (a build without the shared library)"

needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }

mapfile -t libs < <(needed "$lib")
for want in libnghttp2 libwslay libz libc; do
    printf '%s\n' "${libs[@]}" | grep -q "^$want\.so" ||
        fail "libpetrel.so does not need $want: it needs ${libs[*]}"
done
llhttp_system=no
grep -q '^LLHTTP_LIBS = .*-lllhttp' "$top_builddir/Makefile" && llhttp_system=yes
for l in "${libs[@]}"; do
    case ${l%%.so*} in
    libnghttp2 | libwslay | libz | libc | libm | libdl | libpthread) ;;
    libasan | libubsan) [[ $PETREL_SANITIZERS == yes ]] || fail "libpetrel.so needs $l without the sanitizers" ;;
    libllhttp) [[ $llhttp_system == yes ]] || fail "libpetrel.so needs $l, but llhttp is built in" ;;
    *) fail "libpetrel.so needs $l: it should need only libnghttp2, libwslay, libz and the C library (readelf -d: ${libs[*]})" ;;
    esac
done
ok "libpetrel.so needs ${libs[*]}"

out=$(nm -D --defined-only "$lib" | awk '{ print $NF }' | grep -E '^petrel_(pg|static|redis)_' || true)
[[ -z $out ]] || fail "libpetrel.so exports calls of the optional libraries: $(tr '\n' ' ' <<<"$out")"
ok "libpetrel.so exports no call of the optional libraries (pg, static, redis)"

pgsql=no
grep -q '^#define HAVE_PGSQL 1' "$top_builddir/config.h" && pgsql=yes
exported=$(nm -D --defined-only "$PETREL" | awk '{ print $NF }')
for f in petrel_pg_open petrel_pg_exec petrel_pg_query petrel_pg_value petrel_pg_send_error \
    petrel_pg_supported; do
    grep -qx "$f" <<<"$exported" || fail "the petrel command does not export $f to its modules"
done
if [[ $pgsql == yes ]]; then
    needed "$PETREL" | grep -q '^libpq\.so' || fail "the petrel command does not need libpq: $(needed "$PETREL" | tr '\n' ' ')"
    ok "the petrel command exports the pool (petrel_pg_*) to its modules and needs libpq"
else
    ok "the petrel command exports the pool's calls (built without libpq) to its modules"
fi

pc=$top_builddir/petrel.pc
[[ -f $pc ]] || fail "no $pc"
! grep -q 'libpq' "$pc" || fail "petrel.pc names libpq: $(grep libpq "$pc")"
pgpc=$top_builddir/petrel-pg.pc
[[ -f $pgpc ]] || fail "no $pgpc"
if [[ $pgsql == yes ]]; then
    grep -q '^Requires:.*libpq' "$pgpc" || fail "petrel-pg.pc does not require libpq: $(cat "$pgpc")"
fi
ok "petrel.pc requires no libpq; petrel-pg.pc requires $(sed -n 's/^Requires: //p' "$pgpc")"

# the Debian package's symbols file lists exactly what libpetrel.so.0
# exports (the package build checks it too, at dpkg-gensymbols' level 4,
# but only test_deb builds packages): a new call of the API goes there
symfile=$top_srcdir/debian/libpetrel0.symbols
if [[ -f $symfile ]]; then
    exported=$(nm -D --defined-only "$lib" | awk '{ print $3 }' | grep -v '^_' | sort)
    listed=$(sed -n 's/^ \([^@]*\)@Base .*/\1/p' "$symfile" | sort)
    missing=$(comm -23 <(echo "$exported") <(echo "$listed") | tr '\n' ' ')
    extra=$(comm -13 <(echo "$exported") <(echo "$listed") | tr '\n' ' ')
    [[ -z $missing && -z $extra ]] ||
        fail "debian/libpetrel0.symbols: exported but not listed: ${missing:-none}; listed but not exported: ${extra:-none} (add them with the version that brings them)"
    ok "debian/libpetrel0.symbols lists the $(wc -l <<<"$exported") symbols libpetrel.so.0 exports"
fi
