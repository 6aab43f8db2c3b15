#!/usr/bin/env bash
# The three places that list petrel's options say the same, and say what
# petrel accepts (so that they cannot drift apart again):
#   - `petrel --help` (made from the option tables, runtime/options.h),
#   - doc/petrel.1: its OPTIONS entries, and the options of its SYNOPSIS,
#   - README.md: the synopsis under "## Command line",
# against the option tables of the subsystems (what getopt accepts).  The same
# option names everywhere; the same value (ADDR:PORT, NAME|PATH.so|PATH.c[:ARGS]...)
# for each; the default that --help gives appears in the man page's
# "Default:" sentence.  And the first example of petrel(1) works as written
# (petrel --module hello, then curl).
. "$(dirname "$0")/lib.sh"

man=$top_srcdir/doc/petrel.1
readme=$top_srcdir/README.md
cli=$top_srcdir/src/server/cli.c
# the files with an option table: petrel's (runtime/options.h) and the
# built-in modules' (petrel_option_t of petrel.h)
tables=$(grep -lE 'petrel_{1,2}option_t [a-z0-9_]*\[\] = \{' "$top_srcdir"/src/*/*.c \
    "$top_srcdir"/modules/*/*.c)
for f in "$man" "$readme" "$cli"; do
    [[ -f $f ]] || skip "no $f (not a source tree)"
done
"$PETREL" --help >"$LIB_TMP/help.txt" || fail "petrel --help: exit status $?"

# shellcheck disable=SC2086
PYTHONPATH=$LIB_DIR pyrun "$LIB_TMP/help.txt" "$man" "$readme" $tables <<'EOF'
import re
import sys
from petrel_client import *
from petrel_roff import roff_line, sections as man_sections

help_text, man, readme = (open(p, encoding="utf-8").read() for p in sys.argv[1:4])
cli_sources = sys.argv[4:]


def bracket_options(text):
    """{name: value} of the [--name VALUE] groups of a synopsis (nested
    brackets kept in the value)."""
    out = {}
    i = 0
    while True:
        i = text.find("[--", i)
        if i < 0:
            return out
        depth, j = 0, i
        while j < len(text):
            depth += {"[": 1, "]": -1}.get(text[j], 0)
            if depth == 0:
                break
            j += 1
        inner = text[i + 1:j]
        # a nested option: [--root DIR [--autoindex] ...]
        k = inner.find(" [--")
        if k >= 0:
            out.update(bracket_options(inner[k:]))
            inner = inner[:k]
        name, _, value = inner.partition(" ")
        out[name] = value.strip()
        i += 1


# --- the option tables of the subsystems and modules: what getopt accepts -----
table = {}
for src in cli_sources:
    for n, v in re.findall(r'\{\.name = "([a-z0-9-]+)",\s*(\.value = )?', open(src, encoding="utf-8").read()):
        check("--" + n not in table, "--%s is in two option tables" % n)
        table["--" + n] = "required_argument" if v else "no_argument"
check(len(table) > 20, "only %d options found in the option tables" % len(table))

# --- petrel --help --------------------------------------------------------------
helps, hdefault = {}, {}
lines = help_text.split("\n")
for i, ln in enumerate(lines):
    m = re.match(r"^  (--[a-z0-9-]+)(?:, (--[a-z0-9-]+))?(?: (\S+))?(?:\s{2,}(.*)|$)", ln)
    if not m:
        continue
    helps[m.group(1)] = m.group(3) or ""
    if m.group(2):
        helps[m.group(2)] = ""
    desc = m.group(4) or (lines[i + 1].strip() if i + 1 < len(lines) else "")
    d = re.search(r"\(default:? ([^;)\s]+)", desc)
    if d:
        hdefault[m.group(1)] = d.group(1)

# --- doc/petrel.1 -----------------------------------------------------------------
sect = man_sections(man)
check("OPTIONS" in sect and "SYNOPSIS" in sect, "petrel(1) has no OPTIONS or SYNOPSIS section")
mans, mdefault = {}, {}
entries = re.split(r"^\.TP\n", sect["OPTIONS"], flags=re.M)[1:]
for e in entries:
    tag, _, body = e.partition("\n")
    tag = roff_line(tag)
    m = re.match(r"^(--[a-z0-9-]+)(?: (.*))?$", tag)
    check(m, "petrel(1) OPTIONS: an entry that is not an option: %r" % tag)
    mans[m.group(1)] = (m.group(2) or "").strip()
    text = " ".join(roff_line(ln) for ln in body.split("\n"))
    d = re.search(r"Default: ([^.]*(?:\.\d[^.]*)*)", text)
    mdefault[m.group(1)] = d.group(1) if d else None
synopsis = " ".join(roff_line(ln) for ln in sect["SYNOPSIS"].split("\n")[1:])
msyn = bracket_options(synopsis)

# --- README.md -------------------------------------------------------------------------
m = re.search(r"^## Command line\n+```\n(.*?)\n```", readme, flags=re.M | re.S)
check(m, "README.md has no ```-block under '## Command line'")
rsyn = bracket_options(m.group(1))
check("--help" in m.group(1) and "--version" in m.group(1), "README's synopsis has no --help | --version")
rsyn.pop("--help", None)
rsyn.pop("--version", None)

# --- the same options ---------------------------------------------------------------------
def same_set(a, an, b, bn):
    check(set(a) == set(b), "options of %s but not of %s: %s; of %s but not of %s: %s"
          % (an, bn, sorted(set(a) - set(b)) or "none", bn, an, sorted(set(b) - set(a)) or "none"))


same_set(table, "the option tables", helps, "petrel --help")
same_set(helps, "petrel --help", mans, "petrel(1) OPTIONS")
no_meta = {"--help", "--version"}
same_set(set(helps) - no_meta, "petrel --help", rsyn, "README.md's synopsis")
for name, kind in table.items():
    check((kind == "required_argument") == bool(helps[name]),
          "%s: getopt says %s, --help shows the value '%s'" % (name, kind, helps[name]))

# --- with the same values -----------------------------------------------------------
for name, value in helps.items():
    check(mans[name] == value, "%s: --help says '%s', petrel(1) says '%s'" % (name, value, mans[name]))
    if name not in no_meta:
        check(rsyn[name] == value, "%s: --help says '%s', README.md says '%s'" % (name, value, rsyn[name]))
for name, value in msyn.items():
    check(name in helps, "petrel(1) SYNOPSIS names %s, which --help does not" % name)
    check(value == helps[name], "%s: petrel(1) SYNOPSIS says '%s', --help '%s'" % (name, value, helps[name]))

# --- and the same defaults ----------------------------------------------------------
for name, d in hdefault.items():
    check(mdefault.get(name), "%s: --help gives a default (%s), petrel(1) has no 'Default:'" % (name, d))
    check(d in mdefault[name], "%s: --help's default is %s, petrel(1) says 'Default: %s'"
          % (name, d, mdefault[name]))
ok("%d options: the option tables, petrel --help, petrel(1) (OPTIONS and the %d of its SYNOPSIS) and "
   "README.md agree on names and values, and on %d defaults" % (len(table), len(msyn), len(hdefault)))
EOF

# --- petrel(1)'s first example, as written ----------------------------------
first=$(awk '/^\.SH EXAMPLES/ { e = 1 } e && /^\.EX/ { x = 1; next } x && /^\.EE/ { exit } x' "$man" |
    sed -e 's/\\-/-/g')
expect_match "$first" '^petrel --module hello &' "petrel(1)'s first example starts petrel"
url=$(sed -n 's/^curl \(http:[^ ]*\)$/\1/p' <<<"$first")
[[ $url == http://127.0.0.1:8080/* ]] || fail "petrel(1)'s first example: no curl of 127.0.0.1:8080: $first"
petrel_start --module hello
out=$(curl_ -w ' %{http_code}' "${url/127.0.0.1:8080/127.0.0.1:$PORT}")
expect_eq "$out" "Hello World! 200" "petrel(1)'s first example: curl $url"
petrel_stop
ok "petrel(1)'s first example answers: curl $url gives 200 Hello World!"
