#!/usr/bin/env bash
# petrel-bench(1) and `petrel-bench --help` name the same options: every
# option of --help (short and long names, paired as in --help) has an entry
# in the man page's OPTIONS and a place in its SYNOPSIS, and every OPTIONS
# entry is an option of --help; --help and --version are left out (the man
# page says them in passing).
. "$(dirname "$0")/lib.sh"

man=$top_srcdir/doc/petrel-bench.1
[[ -f $man ]] || skip "no $man (not a source tree)"
bench_needs
"$BENCH" --help >"$LIB_TMP/help.txt" || fail "petrel-bench --help: exit status $?"

PYTHONPATH=$LIB_DIR pyrun "$LIB_TMP/help.txt" "$man" <<'PYEOF'
import re
import sys
from petrel_client import *
from petrel_roff import roff_line, sections as man_sections

help_text, man = (open(p, encoding="utf-8").read() for p in sys.argv[1:3])


skip_names = {"--help", "--version"}
# --help: "  -c, --connections N", "      --warmup TIME", "  -m N"
helps = {}
for ln in help_text.split("\n"):
    m = re.match(r"^\s+(-[A-Za-z])?(?:, )?(--[a-z0-9-]+)?(?:, (--[a-z0-9-]+))?(?=\s|$)", ln)
    if not m or not (m.group(1) or m.group(2)):
        continue
    short, long_ = m.group(1), m.group(2)
    for n in (short, long_, m.group(3)):
        if n and n not in skip_names:
            helps.setdefault(n, set()).add(short if n == long_ else long_ if n == short else None)
check(len(helps) > 20, "only %d option names found in petrel-bench --help" % len(helps))

sections = man_sections(man)
check("OPTIONS" in sections and "SYNOPSIS" in sections, "petrel-bench(1) has no OPTIONS or SYNOPSIS")
mans = {}
for e in re.split(r"^\.TP\n", sections["OPTIONS"], flags=re.M)[1:]:
    tag = roff_line(e.split("\n", 1)[0])
    m = re.match(r"^(-[A-Za-z])?(?:, )?(--[a-z0-9-]+)?(?=\s|$)", tag)
    check(m and (m.group(1) or m.group(2)), "petrel-bench(1) OPTIONS: an entry that is not an option: %r" % tag)
    for n in (m.group(1), m.group(2)):
        if n:
            mans.setdefault(n, set()).add(m.group(2) if n == m.group(1) else m.group(1))
synopsis = " ".join(roff_line(ln) for ln in sections["SYNOPSIS"].split("\n")[1:])
in_synopsis = set(re.findall(r"(?<![\w-])(--?[A-Za-z][a-z0-9-]*)", synopsis))

only_help = sorted(set(helps) - set(mans))
only_man = sorted(set(mans) - set(helps))
check(not only_help, "options of petrel-bench --help without an entry in petrel-bench(1) OPTIONS: %s" % only_help)
check(not only_man, "entries of petrel-bench(1) OPTIONS that petrel-bench --help does not have: %s" % only_man)
for n in helps:
    # a short name paired with a long one in --help is paired so in the man page
    for other in helps[n]:
        check(other is None or other in mans[n],
              "%s: --help pairs it with %s, petrel-bench(1) does not" % (n, other))
missing = [n for n in helps if n not in in_synopsis and
           not any(o in in_synopsis for o in helps[n] if o)]
check(not missing, "options of petrel-bench --help missing from petrel-bench(1) SYNOPSIS: %s" % sorted(missing))
ok("petrel-bench --help and petrel-bench(1) name the same %d options (OPTIONS and SYNOPSIS)" % len(helps))
PYEOF
