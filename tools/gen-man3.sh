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
# constants get pages that point to it).  Each page has the declaration
# verbatim (struct fields with their /**< */ comments), the comment as its
# description, and the other declarations of the same section of the header
# (the "/* Errors */" banner lines) under SEE ALSO.  OUTDIR/libpetrel.3 is an
# index of them all; OUTDIR/pages.list lists every page written, for
# `make install`.  POSIX sh and awk only: it runs at build time.
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
function summary(text,    s, i) {
    s = text
    gsub(/\n/, " ", s)
    gsub(/`/, "", s)
    s = trim(s)
    i = match(s, /\.( |$)/)
    if (i > 0) s = substr(s, 1, i - 1)
    if (length(s) > 120) s = substr(s, 1, 117) "..."
    return s
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
            section = trim(s); banner = 0; next
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
function write_page(i,    f, name, paras, np, k, p, lines, nl, j, see, up, pre, l) {
    name = iname[i]
    f = out "/" name ".3"
    up = toupper(name)
    print ".\\\" Generated by tools/gen-man3.sh from include/petrel.h; do not edit." > f
    print ".TH " up " 3 \"\" \"petrel " version "\" \"petrel API\"" > f
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
    for (j = 1; j <= nl; j++) {
        l = lines[j]
        gsub(/PETREL_API /, "", l)
        print roff(l) > f
    }
    print ".fi" > f
    print ".SH DESCRIPTION" > f
    # paragraphs: blank lines; indented lines (code, tables) kept as they are
    nl = split(itext[i], lines, "\n")
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
        print code(roff(trim(l))) > f
    }
    if (pre) print ".fi" > f
    print ".SH SEE ALSO" > f
    see = ".BR libpetrel (3)"
    for (k = 1; k <= nitems; k++)
        if (k != i && isect[k] == isect[i]) see = see ",\n.BR " iname[k] " (3)"
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
