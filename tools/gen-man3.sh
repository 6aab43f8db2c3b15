#!/bin/sh
# gen-man3.sh -- the API reference: one manual page in section 3 for every
# documented declaration of include/petrel.h, made from its /** */ comment.
#
#   tools/gen-man3.sh HEADER OUTDIR VERSION
#
# A declaration is documented when a /** ... */ comment comes right before
# it: a PETREL_API function, a typedef (struct, opaque or function pointer),
# a #define (a macro) or an enum.  Its page is OUTDIR/NAME.3 (NAME: the
# function, type or macro; for an enum, its first constant, and the other
# constants get pages that point to it).  OUTDIR/libpetrel.3 is an index of
# them all, by section of the header (the "/* Errors */" banner lines, less
# any "(file)" or "-- begin" in them); OUTDIR/pages.list lists every page
# written, for `make install`.  POSIX sh and awk only: it runs at build time.
#
# The comment, in paragraphs (blank lines between them):
#   - the first sentence is the summary: the NAME line of the page and its
#     line in libpetrel(3), whole (keep it short; no "e.g." in it);
#   - paragraphs that begin with a label go to a section of their own:
#       Returns: ...    RETURN VALUE
#       Errors: ...     ERRORS; prose, or a list of lines
#                         "  PETREL_EXXX  what it means" (continuation lines
#                         indented deeper)
#       Lifetime: ...   OWNERSHIP AND LIFETIME: who owns each pointer, what
#                       is copied, until when a result is valid
#       Example:        EXAMPLES: the indented lines that follow, up to the
#                       next unindented line (blank lines kept): a whole
#                       piece of C that compiles after #include <petrel.h>
#                       (tests/integration/test_doc_man3.sh compiles it)
#   - the rest is the DESCRIPTION; lines indented by two spaces or more are
#     kept as they are (code, tables); `x` is set in bold.
# Every function's comment has Returns:, Errors: and Lifetime: paragraphs
# (test_doc_man3.sh checks the pages).
set -eu

if [ $# -ne 3 ]; then
    echo "usage: $0 HEADER OUTDIR VERSION" >&2
    exit 2
fi
header=$1
out=$2
version=$3
mkdir -p "$out"
rm -f "$out"/*.3 "$out/pages.list" "$out/pages.list.tmp"

awk -v out="$out" -v version="$version" '
function trim(s) { sub(/^[ \t\n]+/, "", s); sub(/[ \t\n]+$/, "", s); return s }
# roff: escape backslashes and protect leading dots/quotes
function roff(s) {
    gsub(/\\/, "\\e", s)
    if (s ~ /^[.\047]/) s = "\\&" s
    return s
}
# the first sentence of a comment, for the NAME line
# `x` in a comment: x in bold
function code(s,    r) {
    r = ""
    while (match(s, /`[^`]+`/)) {
        r = r substr(s, 1, RSTART - 1) "\\fB" substr(s, RSTART + 1, RLENGTH - 2) "\\fP"
        s = substr(s, RSTART + RLENGTH)
    }
    return r s
}
function summary(text,    s, r, i) {
    s = text
    gsub(/\n/, " ", s)
    gsub(/`/, "", s)
    gsub(/[ \t]+/, " ", s)
    s = trim(s)
    # the first sentence: up to a period and a space (or the end), not the
    # one of an abbreviation
    r = ""
    while ((i = match(s, /\.( |$)/)) > 0) {
        if (substr(s, 1, i) ~ /(e\.g|i\.e|etc|cf)\.$/) {
            r = r substr(s, 1, i + 1)
            s = substr(s, i + 2)
            continue
        }
        return trim(r substr(s, 1, i - 1))
    }
    return trim(r s)
}
# a section name of the header, without file names and block markers
function section_name(s) {
    sub(/ *-- *(begin|end) *$/, "", s)
    gsub(/ *\([^()]*[\/.][^()]*\)/, "", s)
    return trim(s)
}
function decl_name(d, kind,    s, a) {
    s = d
    if (kind == "define") {
        sub(/^#define[ \t]+/, "", s)
        match(s, /^[A-Za-z_][A-Za-z_0-9]*/)
        return substr(s, RSTART, RLENGTH)
    }
    if (kind == "enum") {
        sub(/^[^{]*\{/, "", s)
        gsub(/\/\*[^*]*\*+([^\/*][^*]*\*+)*\//, "", s)
        match(s, /[A-Za-z_][A-Za-z_0-9]*/)
        return substr(s, RSTART, RLENGTH)
    }
    if (kind == "struct") {
        # typedef struct x { ... } NAME;
        s = substr(s, length(s) - 200 > 0 ? length(s) - 200 : 1)
        n = split(s, a, "}")
        s = a[n]
        gsub(/[ \t\n;]/, "", s)
        return s
    }
    if (s ~ /^typedef/ && s ~ /\(\*/) {
        match(s, /\(\*[A-Za-z_0-9]+\)/)
        return substr(s, RSTART + 2, RLENGTH - 3)
    }
    if (s ~ /^typedef/) {
        gsub(/[\n;]/, " ", s)
        n = split(trim(s), a, /[ \t*]+/)
        return a[n]
    }
    # a function: the identifier before the first "("
    match(s, /[A-Za-z_][A-Za-z_0-9]*[ \t]*\(/)
    s = substr(s, RSTART, RLENGTH)
    sub(/[ \t]*\($/, "", s)
    return s
}
function enum_names(d,    s, a, n, i, r, nm) {
    s = d
    sub(/^[^{]*\{/, "", s)
    sub(/\}[^}]*$/, "", s)
    gsub(/\/\*[^*]*\*+([^\/*][^*]*\*+)*\//, "", s)
    n = split(s, a, ",")
    r = ""
    for (i = 1; i <= n; i++) {
        nm = trim(a[i])
        sub(/[ \t=].*$/, "", nm)
        gsub(/\n.*/, "", nm)
        nm = trim(nm)
        if (nm ~ /^[A-Za-z_][A-Za-z_0-9]*$/) r = r (r == "" ? "" : " ") nm
    }
    return r
}
BEGIN { state = "code"; nitems = 0; section = "" }
{
    line = $0
    if (state == "code") {
        if (line ~ /^\/\* -+ \*\/$/) { banner = 1; next }
        if (banner && line ~ /^\/\* [A-Za-z]/) {
            s = line; sub(/^\/\* /, "", s); sub(/ *\*\/$/, "", s)
            section = section_name(s); banner = 0; next
        }
        banner = 0
        if (line ~ /^[ \t]*\/\*\*/ && line !~ /^[ \t]*\/\*\*</) {
            comment = ""
            s = line; sub(/^[ \t]*\/\*\*[ \t]?/, "", s)
            # "/** text" continues with " *  text": strip the star and two
            # spaces; "/**" alone continues with " * text": one space
            inline = trim(s) != ""
            if (s ~ /\*\/[ \t]*$/) {
                sub(/[ \t]*\*\/[ \t]*$/, "", s)
                comment = s; state = "after"
            } else {
                comment = s; state = "comment"
            }
            next
        }
        next
    }
    if (state == "comment") {
        s = line
        done = (s ~ /\*\/[ \t]*$/)
        sub(/[ \t]*\*\/[ \t]*$/, "", s)
        if (inline) sub(/^[ \t]*\*( ? ?)/, "", s)
        else sub(/^[ \t]*\*[ \t]?/, "", s)
        comment = comment (comment == "" ? "" : "\n") s
        if (done) state = "after"
        next
    }
    if (state == "after") {
        if (trim(line) == "") next
        decl = line
        if (line ~ /^#define/) kind = "define"
        else if (line ~ /^(typedef )?enum/) kind = "enum"
        else if (line ~ /^typedef struct [A-Za-z_0-9]+ *\{/) kind = "struct"
        else kind = "other"
        if (line ~ /^#ifdef|^#if |^#ifndef/) { state = "code"; next }
        state = "decl"
        if (decl_done(line)) finish()
        next
    }
    if (state == "decl") {
        decl = decl "\n" line
        if (decl_done(line)) finish()
        next
    }
}
function decl_done(l) {
    if (kind == "define") return l !~ /\\[ \t]*$/
    if (kind == "struct") return l ~ /^\}.*;[ \t]*$/
    if (kind == "enum") return l ~ /\}[^}]*;[ \t]*$/
    return l ~ /;[ \t]*$/
}
function finish(    name) {
    name = decl_name(decl, kind)
    if (name == "" ) { state = "code"; return }
    nitems++
    iname[nitems] = name
    ikind[nitems] = kind
    idecl[nitems] = decl
    itext[nitems] = comment
    isect[nitems] = section
    if (kind == "enum") ialias[nitems] = enum_names(decl)
    state = "code"
}
# text: bold for `x`, roff-escaped, one line
function text(l) {
    return code(roff(trim(l)))
}
# split the comment of item i into the parts of its page: desc[], ret, errs[],
# life, ex (newline-joined lines), and counts ndesc, nerrs
function parse_comment(c,    lines, nl, j, l, mode, para, m) {
    ndesc = 0; nerrs = 0; ret = ""; life = ""; ex = ""
    nl = split(c, lines, "\n")
    mode = "desc"
    for (j = 1; j <= nl; j++) {
        l = lines[j]
        if (mode == "ex") {
            if (trim(l) == "" || l ~ /^  /) { ex = ex (ex == "" && trim(l) == "" ? "" : l "\n"); continue }
            mode = "desc"
        }
        if (trim(l) == "") {
            if (mode != "errs") mode = "desc"
            else if (j < nl && lines[j + 1] !~ /^  /) mode = "desc"
            desc[++ndesc] = ""
            continue
        }
        if (match(l, /^Returns:[ \t]*/)) { mode = "ret"; l = substr(l, RLENGTH + 1); if (trim(l) == "") continue }
        else if (match(l, /^Errors:[ \t]*/)) { mode = "errs"; l = substr(l, RLENGTH + 1); if (trim(l) == "") continue }
        else if (match(l, /^Lifetime:[ \t]*/)) { mode = "life"; l = substr(l, RLENGTH + 1); if (trim(l) == "") continue }
        else if (l ~ /^Example:[ \t]*$/) { mode = "ex"; continue }
        if (mode == "ret") ret = ret (ret == "" ? "" : "\n") l
        else if (mode == "life") life = life (life == "" ? "" : "\n") l
        else if (mode == "errs") {
            if (match(l, /^  [A-Z][A-Z_0-9]*  +/) || match(l, /^  [A-Z][A-Z_0-9]* +/) && l !~ /^   /) {
                m = trim(substr(l, 1, RLENGTH))
                nerrs++
                errname[nerrs] = m
                errtext[nerrs] = trim(substr(l, RLENGTH + 1))
            } else if (nerrs > 0 && l ~ /^   /) {
                errtext[nerrs] = errtext[nerrs] " " trim(l)
            } else {
                nerrs++
                errname[nerrs] = ""
                errtext[nerrs] = trim(l)
                # prose: the following lines of the paragraph join it
                while (j < nl && trim(lines[j + 1]) != "" && lines[j + 1] !~ /^[A-Z][a-z]+:/) {
                    j++
                    errtext[nerrs] = errtext[nerrs] " " trim(lines[j])
                }
            }
        } else desc[++ndesc] = l
    }
}
# prose lines (a paragraph or several, blank lines between), as roff
function prose(s, f,    lines, nl, j, l, pre) {
    nl = split(s, lines, "\n")
    pre = 0
    for (j = 1; j <= nl; j++) {
        l = lines[j]
        if (trim(l) == "") { if (pre) { print ".fi" > f; pre = 0 } print ".PP" > f; continue }
        if (l ~ /^  /) {
            if (!pre) { print ".PP" > f; print ".nf" > f; pre = 1 }
            print roff(l) > f
            continue
        }
        if (pre) { print ".fi" > f; pre = 0 }
        print text(l) > f
    }
    if (pre) print ".fi" > f
}
function write_page(i,    f, name, k, lines, nl, j, see, up, l, d, first, body, api) {
    name = iname[i]
    f = out "/" name ".3"
    up = toupper(name)
    print ".\\\" Generated by tools/gen-man3.sh from include/petrel.h; do not edit." > f
    print ".TH " up " 3 \"\" \"petrel " version "\" \"petrel API\"" > f
    print ".nh" > f
    print ".SH NAME" > f
    if (ikind[i] == "enum") {
        n = split(ialias[i], a, " ")
        s = ""
        for (k = 1; k <= n; k++) s = s (k > 1 ? ", " : "") a[k]
        print roff(s) " \\- " roff(summary(itext[i])) > f
    } else {
        print name " \\- " roff(summary(itext[i])) > f
    }
    print ".SH SYNOPSIS" > f
    print ".nf" > f
    print ".B #include <petrel.h>" > f
    print ".PP" > f
    nl = split(idecl[i], lines, "\n")
    api = 0
    for (j = 1; j <= nl; j++) {
        l = lines[j]
        if (j == 1 && sub(/^PETREL_API /, "", l)) api = 1
        # continuation lines were aligned after "PETREL_API "
        else if (api) sub(/^           /, "", l)
        print roff(l) > f
    }
    print ".fi" > f
    parse_comment(itext[i])
    # the description: the paragraphs of the comment, less the summary when it is
    # a paragraph of its own and more follows
    body = ""
    for (k = 1; k <= ndesc; k++) body = body (k > 1 ? "\n" : "") desc[k]
    sub(/^\n+/, "", body)
    sub(/\n+$/, "", body)
    first = body
    sub(/\n\n.*$/, "", first)
    if (first != body) {
        d = first
        gsub(/\n/, " ", d)
        gsub(/[ \t]+/, " ", d)
        gsub(/`/, "", d)
        if (trim(d) == summary(itext[i]) ".") {
            body = substr(body, length(first) + 1)
            sub(/^\n+/, "", body)
        }
    }
    print ".SH DESCRIPTION" > f
    prose(body, f)
    if (ret != "") {
        print ".SH RETURN VALUE" > f
        prose(ret, f)
    }
    if (nerrs > 0) {
        print ".SH ERRORS" > f
        for (k = 1; k <= nerrs; k++) {
            if (errname[k] == "") {
                print ".PP" > f
                print text(errtext[k]) > f
            } else {
                print ".TP" > f
                print ".B " errname[k] > f
                print text(errtext[k]) > f
            }
        }
    }
    if (life != "") {
        print ".SH OWNERSHIP AND LIFETIME" > f
        prose(life, f)
    }
    if (ex != "") {
        sub(/\n+$/, "", ex)
        print ".SH EXAMPLES" > f
        print ".PP" > f
        print ".EX" > f
        nl = split(ex, lines, "\n")
        for (j = 1; j <= nl; j++) {
            l = lines[j]
            sub(/^  /, "", l)
            print roff(l) > f
        }
        print ".EE" > f
    }
    print ".SH SEE ALSO" > f
    print ".ad l" > f
    see = ".BR libpetrel (3)"
    # \% : names are not hyphenated
    for (k = 1; k <= nitems; k++)
        if (k != i && isect[k] == isect[i]) see = see ",\n.BR \\%" iname[k] " (3)"
    print see > f
    close(f)
    print name ".3" > (out "/pages.list.tmp")
    if (ikind[i] == "enum") {
        n = split(ialias[i], a, " ")
        for (k = 2; k <= n; k++) {
            f = out "/" a[k] ".3"
            print ".so man3/" name ".3" > f
            close(f)
            print a[k] ".3" > (out "/pages.list.tmp")
        }
    }
}
END {
    for (i = 1; i <= nitems; i++) write_page(i)
    f = out "/libpetrel.3"
    print ".\\\" Generated by tools/gen-man3.sh from include/petrel.h; do not edit." > f
    print ".TH LIBPETREL 3 \"\" \"petrel " version "\" \"petrel API\"" > f
    print ".nh" > f
    print ".SH NAME" > f
    print "libpetrel \\- the C API of petrel: handler modules, requests, responses, arenas" > f
    print ".SH SYNOPSIS" > f
    print ".nf" > f
    print ".B #include <petrel.h>" > f
    print ".fi" > f
    print ".PP" > f
    print "Compile and link a module with" > f
    print ".BR \"pkg\\-config \\-\\-cflags petrel\" ," > f
    print "or build it with" > f
    print ".BR petrel\\-mod (1)." > f
    print ".SH DESCRIPTION" > f
    print "Every declaration of" > f
    print ".I <petrel.h>" > f
    print "has a page of its own, by section of the header:" > f
    sect = ""
    for (i = 1; i <= nitems; i++) {
        if (isect[i] != sect) {
            sect = isect[i]
            print ".SS " roff(sect) > f
        }
        print ".TP" > f
        print ".BR " iname[i] " (3)" > f
        print roff(summary(itext[i])) "." > f
    }
    print ".SH SEE ALSO" > f
    print ".BR petrel (1)," > f
    print ".BR petrel\\-mod (1)" > f
    close(f)
    print "libpetrel.3" > (out "/pages.list.tmp")
}
' "$header"
# written last: make takes pages.list for "all pages made"
mv -f "$out/pages.list.tmp" "$out/pages.list"
