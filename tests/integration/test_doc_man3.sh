#!/usr/bin/env bash
# The API reference (tools/gen-man3.sh, from the /** */ comments of
# include/petrel.h) is complete and clean:
#  - every PETREL_API function's page has a synopsis, a description, its
#    return value, its errors and who owns what for how long (RETURN VALUE,
#    ERRORS, OWNERSHIP AND LIFETIME);
#  - every example in the pages compiles (after #include <petrel.h>, with
#    -Wall -Wextra -Werror);
#  - the index libpetrel(3) gives each page's whole first sentence (nothing
#    cut short with "..."), under section headings without file names or
#    block markers;
#  - groff formats every page without a warning.
. "$(dirname "$0")/lib.sh"

header=$top_srcdir/include/petrel.h
gen=$top_srcdir/tools/gen-man3.sh
[[ -f $header && -f $gen ]] || skip "no $header or $gen (not a source tree)"
command -v cc >/dev/null || skip "no C compiler (cc)"
command -v groff >/dev/null || skip "no groff (apt-get install groff-base)"
man3=$LIB_TMP/man3
sh "$gen" "$header" "$man3" test >"$LIB_TMP/gen.out" 2>&1 || fail "gen-man3.sh: $(cat "$LIB_TMP/gen.out")"

pyrun "$header" "$man3" "$top_srcdir/include" "$LIB_TMP" <<'PYEOF'
import os
import re
import subprocess
import sys
from petrel_client import *

header, man3, incdir, tmp = sys.argv[1:5]
h = open(header, encoding="utf-8").read()
funcs = re.findall(r"^PETREL_API [^(]*?[ *]([a-z_0-9]+)\(", h, flags=re.M)
check(len(funcs) > 30, "only %d PETREL_API functions found in petrel.h" % len(funcs))


def page(name):
    path = os.path.join(man3, name + ".3")
    check(os.path.exists(path), "no page %s.3" % name)
    return open(path, encoding="utf-8").read()


def sections(text):
    out, cur = {}, None
    for ln in text.split("\n"):
        if ln.startswith(".SH "):
            cur = ln[4:].strip().strip('"')
            out[cur] = []
        elif cur:
            out[cur].append(ln)
    return {k: "\n".join(v) for k, v in out.items()}


need = ["NAME", "SYNOPSIS", "DESCRIPTION", "RETURN VALUE", "ERRORS", "OWNERSHIP AND LIFETIME"]
missing = []
for f in funcs:
    sec = sections(page(f))
    for n in need:
        body = re.sub(r"^\.(PP|fi|nf)$", "", sec.get(n, ""), flags=re.M).strip()
        if not body:
            missing.append("%s: %s" % (f, n))
check(not missing, "pages without a needed section (add Returns:, Errors: or Lifetime: paragraphs "
      "to the /** */ comment in include/petrel.h; tools/gen-man3.sh says how): %s" % missing)
ok("the pages of the %d functions have %s" % (len(funcs), ", ".join(need)))

# --- the examples compile ------------------------------------------------------
def unroff(ln):
    return ln.replace("\\e", "\\").replace("\\&", "").replace("\\-", "-")


examples = 0
for name in sorted(os.listdir(man3)):
    if not name.endswith(".3"):
        continue
    text = open(os.path.join(man3, name), encoding="utf-8").read()
    for m in re.finditer(r"^\.EX\n(.*?)^\.EE$", text, flags=re.M | re.S):
        src = "#include <petrel.h>\n" + "\n".join(unroff(l) for l in m.group(1).split("\n"))
        path = os.path.join(tmp, "ex-%s.c" % name[:-2])
        open(path, "w").write(src)
        r = subprocess.run(["cc", "-fsyntax-only", "-std=gnu11", "-Wall", "-Wextra", "-Werror",
                            "-Wno-unused-function", "-I", incdir, path], capture_output=True, text=True)
        check(r.returncode == 0, "the example of %s does not compile:\n%s\n%s" % (name, src, r.stderr))
        examples += 1
check(examples >= 20, "only %d examples in the pages" % examples)
ok("the %d examples of the pages compile with -Wall -Wextra -Werror" % examples)

# --- the index ---------------------------------------------------------------------
idx = open(os.path.join(man3, "libpetrel.3"), encoding="utf-8").read()
check("..." not in idx, "libpetrel(3) cuts a summary short: %s" % [l for l in idx.split("\n") if "..." in l])
heads = re.findall(r"^\.SS (.*)$", idx, flags=re.M)
check(len(heads) >= 6, "libpetrel(3) has only %d section headings" % len(heads))
bad = [x for x in heads if not re.fullmatch(r"[A-Z][A-Za-z ]*[a-z]", x)]
check(not bad, "libpetrel(3) section headings with file names or markers: %s" % bad)
entries = re.findall(r"^\.TP\n\.BR (\S+) \(3\)\n(.*)$", idx, flags=re.M)
check(len(entries) >= len(funcs), "libpetrel(3) lists %d pages for %d functions" % (len(entries), len(funcs)))
long_ = [(n, s) for n, s in entries if len(s) > 100 or not s.endswith(".") or "  " in s]
check(not long_, "libpetrel(3) summaries that are over 100 characters, do not end a sentence or "
      "hold double spaces (shorten the first sentence of the comment): %s" % long_)
for n, s in entries:
    names = re.search(r"^\.SH NAME\n(.*)$", page(n), flags=re.M).group(1)
    check(names.split(" \\- ", 1)[1] + "." == s,
          "%s: its NAME line and its libpetrel(3) entry differ: %r, %r" % (n, names, s))
ok("libpetrel(3): %d whole summaries under %d headings (%s)" % (len(entries), len(heads), ", ".join(heads)))
PYEOF

# (from the directory above man3/: the pages of enum constants are
# ".so man3/FIRST.3")
cd "$LIB_TMP"
for f in man3/*.3; do
    w=$(groff -man -Tutf8 -ww -z "$f" 2>&1) || fail "groff $f: $w"
    [[ -z $w ]] || fail "groff warns about ${f##*/}: $w"
done
ok "groff formats the $(ls "$man3"/*.3 | wc -l) pages without a warning"
