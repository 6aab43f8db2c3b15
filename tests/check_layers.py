#!/usr/bin/python3
"""check_layers.py -- every call in the library goes down the layers, never up.

The directories of src/ are the layers of doc/architecture.md, bottom up:

    runtime  <  protocols  <  framework  <  server  <  the optional libraries
                                                       (pg, redis, modules/static)

For every object file of the build (src/LAYER/.libs/*.o and
modules/static/.libs/*.o under $top_builddir, or the directory given), `nm`
says which symbols it defines and which it uses; a file depends on the file
that defines a symbol it uses.  The check fails when

  - a file uses a symbol of a file in a higher layer, unless the pair is in
    ALLOWED below (each entry says why);
  - the optional libraries are called by the core (any core layer using a
    symbol of pg, redis or the static module: the core must link without
    them);
  - an optional library uses an internal of the core (a `petrel__` symbol
    defined in a core layer): they are written against the public API
    (PETREL_API), as a module is;
  - a source file of a library in PUBLIC_HEADERS_ONLY includes a header
    with quotes (`#include "..."`: one of src/, or config.h) rather than
    <petrel.h>, <petrel/...>, its third-party library's and the system's:
    what a private header gives inline never shows in the symbols;
  - the files of one layer call each other in a circle;
  - a private header of the core declares a process-global function pointer
    (`extern ... (*name)(...)`): a lower layer calling up through a pointer
    that a higher one set is an upward call the symbols would not show;
  - a file of the core keeps a process-global function pointer of its own
    (a file-scope `static` variable of function-pointer type, written out
    or through a typedef, not const): set through a setter from above, it
    is the same hook in disguise.
    The only ones allowed are in ALLOWED_HOOKS, each with its reason.

It prints the files by layer with what each uses, then "ok".  With
--self-test it also plants objects beside copies of the real ones -- one
that makes an upward call (the runtime's transport calling the router), a
core file calling the PostgreSQL pool, a pool file using the loop's
internals -- a hook in a private header, a static hook with its setter,
and a pool source that includes a private header, and checks that each
makes the check fail.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

LAYERS = ["runtime", "protocols", "framework", "server", "pg", "redis", "static"]
RANK = {"runtime": 0, "protocols": 1, "framework": 2, "server": 3,
        "pg": 4, "redis": 4, "static": 4}
OPTIONAL = {"pg", "redis", "static"}

# (layer of the caller, symbol of a higher layer): why it may be called.
ALLOWED = {
    ("protocols", "petrel__req_dispatch"):
        "proto.h, the protocol/framework contract: a protocol hands a parsed request up",
    ("protocols", "petrel__req_started"):
        "proto.h, the contract: the request's start, for its duration and metrics",
    ("protocols", "petrel__req_log"):
        "proto.h, the contract: petrel__req_finished(), inline there, is the one place "
        "every protocol reports a request's end (the access log line)",
    ("protocols", "petrel__quiet_server"):
        "proto.h, the contract: petrel__req_finished() leaves the admin listener's "
        "requests out of the access log",
    ("protocols", "petrel__req_streams"):
        "proto.h, the contract: at the head of a request with a body, whether its "
        "route reads the body as it arrives (PETREL_BODY_STREAM)",
    ("protocols", "petrel__req_abort"):
        "proto.h, the contract: the client of a dispatched request is gone",
    ("protocols", "petrel_send_status"):
        "proto.h, the contract: a protocol refuses a request it has parsed (a bad h2 "
        "body, a failed upgrade) with the framework's own error response",
    ("protocols", "petrel_stream_begin"):
        "proto.h, the contract: the 200 of an RFC 8441 tunnel is the response of its "
        "CONNECT request",
}

# Process-global function pointers allowed in the core's private headers.
ALLOWED_HOOKS = {}

# Optional libraries whose sources (the directory under the source tree)
# include only public headers: <petrel.h>, <petrel/...>, their third-party
# library's and the system's.
PUBLIC_HEADERS_ONLY = {"pg": "src/pg"}


def symbols(obj):
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defs, uses = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TDBRCV":
            defs.add(parts[2])
        elif len(parts) == 2 and parts[0] == "U":
            uses.add(parts[1])
    return defs, uses


def layer_of(path):
    """The layer of an object from its directory, or None (not checked)."""
    parts = path.split(os.sep)
    if "static" in parts and "modules" in parts:
        return "static"
    for p in parts:
        if p in RANK:
            return p
    return None


def objects(top):
    found = []
    for sub in ("src", "modules"):
        for root, _, files in os.walk(os.path.join(top, sub)):
            if os.path.basename(root) != ".libs":
                continue
            for f in files:
                if not f.endswith(".o") or "llhttp" in f:  # llhttp: third-party
                    continue
                path = os.path.join(root, f)
                layer = layer_of(os.path.relpath(path, top))
                if layer is not None:
                    found.append((path, layer))
    return sorted(found)


def hooks(srcdir):
    """extern function-pointer declarations in the core's private headers."""
    bad = []
    pat = re.compile(r"^\s*extern\b[^;]*\(\s*\*\s*(\w+)\s*\)\s*\(", re.M)
    for layer in ("runtime", "protocols", "framework", "server"):
        d = os.path.join(srcdir, "src", layer)
        if not os.path.isdir(d):
            continue
        for f in sorted(os.listdir(d)):
            if f.endswith(".h"):
                text = open(os.path.join(d, f)).read()
                for m in pat.finditer(text):
                    if m.group(1) not in ALLOWED_HOOKS:
                        bad.append("%s/%s: extern function pointer %s" % (layer, f, m.group(1)))
    return bad


def private_includes(srcdir):
    """Quoted includes in the sources of PUBLIC_HEADERS_ONLY libraries."""
    bad = []
    pat = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
    for lay, sub in sorted(PUBLIC_HEADERS_ONLY.items()):
        d = os.path.join(srcdir, sub)
        if not os.path.isdir(d):
            continue
        for f in sorted(os.listdir(d)):
            if f.endswith((".c", ".h")):
                text = open(os.path.join(d, f)).read()
                for m in pat.finditer(text):
                    bad.append("%s/%s includes \"%s\": the %s library includes only public "
                               "headers (<petrel.h>, <petrel/...>)" % (sub, f, m.group(1), lay))
    return bad


def fnptr_typedefs(srcdir):
    """Names of function-pointer typedefs (`typedef R (*name)(...)`) of the
    installed header and the core."""
    pat = re.compile(r"\btypedef\b[^;{}]*\(\s*\*\s*(\w+)\s*\)\s*\(")
    names = set()
    paths = [os.path.join(srcdir, "include", "petrel.h")]
    for layer in ("runtime", "protocols", "framework", "server"):
        d = os.path.join(srcdir, "src", layer)
        if os.path.isdir(d):
            paths += [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith((".h", ".c"))]
    for path in paths:
        if os.path.isfile(path):
            names.update(pat.findall(open(path).read()))
    return names


def static_hooks(srcdir):
    """File-scope static function pointers (not const) in the core's files."""
    bad = []
    direct = re.compile(r"^static\s+(?!const\b)[^;=(){}]*\(\s*\*\s*(\w+)\s*\)\s*\(", re.M)
    typed = re.compile(r"^static\s+(\w+)\s+(\w+)\s*(?:;|=|,)", re.M)
    types = fnptr_typedefs(srcdir)
    for layer in ("runtime", "protocols", "framework", "server"):
        d = os.path.join(srcdir, "src", layer)
        if not os.path.isdir(d):
            continue
        for f in sorted(os.listdir(d)):
            if not f.endswith((".c", ".h")):
                continue
            text = open(os.path.join(d, f)).read()
            found = [m.group(1) for m in direct.finditer(text)]
            found += [m.group(2) for m in typed.finditer(text) if m.group(1) in types]
            for n in found:
                if n not in ALLOWED_HOOKS:
                    bad.append("%s/%s: static function pointer %s" % (layer, f, n))
    return bad


def check(top, srcdir, quiet=False):
    objs = objects(top)
    if not objs:
        print("no object files under %s (build first)" % top)
        return ["no object files"] if quiet else 1
    name = {}
    defs, uses, layer = {}, {}, {}
    for path, lay in objs:
        n = "%s/%s" % (lay, os.path.basename(path)[:-2])
        name[path] = n
        defs[n], uses[n] = symbols(path)
        layer[n] = lay
    owner = {}
    for n, ds in defs.items():
        for s in ds:
            owner.setdefault(s, n)
    errors = []
    deps = {}
    for n in sorted(uses):
        deps[n] = {}
        for s in sorted(uses[n]):
            m = owner.get(s)
            if m is None or m == n:
                continue
            deps[n].setdefault(m, []).append(s)
    for n in sorted(deps):
        for m, syms in sorted(deps[n].items()):
            a, b = layer[n], layer[m]
            if b in OPTIONAL and a not in OPTIONAL:
                errors.append("%s calls the optional library %s: %s" % (n, m, ", ".join(syms[:6])))
            elif a in OPTIONAL and b not in OPTIONAL:
                inner = [s for s in syms if s.startswith("petrel__")]
                if inner:
                    errors.append("%s uses internals of the core (%s): %s; an optional library "
                                  "uses the public API only" % (n, m, ", ".join(inner[:6])))
            elif RANK[b] > RANK[a] and b not in OPTIONAL:
                up = [s for s in syms if (a, s) not in ALLOWED]
                if up:
                    errors.append("upward call %s (%s) -> %s (%s): %s"
                                  % (n, a, m, b, ", ".join(up[:6])))
            elif b in OPTIONAL and a in OPTIONAL and b != a:
                errors.append("%s calls another optional library %s: %s"
                              % (n, m, ", ".join(syms[:6])))
    # circles among the files of one layer of the core
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(deps[n]):
            if layer[m] != layer[n] or layer[n] in OPTIONAL:
                continue
            if state.get(m) == 1:
                cyc = stack[stack.index(m):] + [m]
                errors.append("circle: " + " -> ".join(cyc))
                continue
            if state.get(m) is None:
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(deps):
        if state.get(n) is None:
            visit(n)
    errors += hooks(srcdir)
    errors += private_includes(srcdir)
    errors += static_hooks(srcdir)
    if not quiet:
        for lay in LAYERS:
            files = sorted(n for n in deps if layer[n] == lay)
            if not files:
                continue
            print("%s:" % lay)
            for n in files:
                print("  %-24s -> %s" % (n, " ".join(sorted(deps[n])) or "-"))
    if quiet:
        return errors
    for e in errors:
        print("FAIL: " + e)
    if errors:
        return 1
    if not quiet:
        print("ok: %d files, every call goes down the layers (%d allowed contract calls)"
              % (len(deps), len(ALLOWED)))
    return 0


def self_test(top, srcdir):
    """Plant a runtime object that calls the router: the check must fail."""
    with tempfile.TemporaryDirectory() as tmp:
        for path, _ in objects(top):
            dst = os.path.join(tmp, os.path.relpath(path, top))
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy(path, dst)
        planted = os.path.join(tmp, "src", "runtime", ".libs")
        c = os.path.join(tmp, "planted.c")
        with open(c, "w") as f:
            f.write("void *petrel__router_new(void);\n"
                    "void *planted_call(void);\n"
                    "void *planted_call(void) { return petrel__router_new(); }\n")
        cc = os.environ.get("CC", "cc")
        subprocess.run([cc, "-c", "-o", os.path.join(planted, "planted.o"), c], check=True)
        caught = check(tmp, srcdir, quiet=True)
        if not any("planted" in e for e in caught):
            print("FAIL: self-test: a runtime object calling petrel__router_new passed the check")
            return 1
        print("self-test: caught " + [e for e in caught if "planted" in e][0])
        # the core calling the pool, and the pool using the core's internals
        core_pg = os.path.join(tmp, "core_pg.c")
        with open(core_pg, "w") as f:
            f.write("void *petrel_pg_open(const void *opts);\n"
                    "void *planted_core_pg(void);\n"
                    "void *planted_core_pg(void) { return petrel_pg_open(0); }\n")
        pg_inner = os.path.join(tmp, "pg_inner.c")
        with open(pg_inner, "w") as f:
            f.write("extern void *petrel__loop;\n"
                    "void *planted_pg_inner(void);\n"
                    "void *planted_pg_inner(void) { return petrel__loop; }\n")
        pg_dir = os.path.join(tmp, "src", "pg", ".libs")
        os.makedirs(pg_dir, exist_ok=True)
        for src, obj, want in ((core_pg, os.path.join(planted, "planted_core_pg.o"),
                                "calls the optional library pg/"),
                               (pg_inner, os.path.join(pg_dir, "planted_pg_inner.o"),
                                "uses internals of the core")):
            subprocess.run([cc, "-c", "-o", obj, src], check=True)
            caught = check(tmp, srcdir, quiet=True)
            hit = [e for e in caught if want in e and "planted" in e]
            if not hit:
                print("FAIL: self-test: %s passed the check" % os.path.basename(obj))
                return 1
            print("self-test: caught " + hit[0])
            os.unlink(obj)
        # and a hook declared in a private header
        hdr_dir = os.path.join(tmp, "src-hooks", "src", "runtime")
        os.makedirs(hdr_dir)
        with open(os.path.join(hdr_dir, "planted.h"), "w") as f:
            f.write("extern void (*petrel__planted_hook)(int x);\n")
        planted_hooks = hooks(os.path.join(tmp, "src-hooks"))
        if not planted_hooks:
            print("FAIL: self-test: an extern function pointer in a private header passed")
            return 1
        print("self-test: caught " + planted_hooks[0])
        # and a private header included by the pool
        pg_src = os.path.join(tmp, "src-hooks", "src", "pg")
        os.makedirs(pg_src)
        with open(os.path.join(pg_src, "planted.c"), "w") as f:
            f.write('#include <petrel.h>\n#include "runtime/loop.h"\n')
        planted_inc = private_includes(os.path.join(tmp, "src-hooks"))
        if not planted_inc:
            print("FAIL: self-test: a private header included by the pool passed")
            return 1
        print("self-test: caught " + planted_inc[0])
        # and a static hook with its setter, written out and through a typedef
        with open(os.path.join(hdr_dir, "planted.c"), "w") as f:
            f.write("typedef int (*planted_hook_t)(void *req);\n"
                    "static planted_hook_t planted_typed;\n"
                    "static void (*planted_direct)(int x);\n"
                    "void petrel__planted_set(planted_hook_t h, void (*d)(int))\n"
                    "{\n    planted_typed = h;\n    planted_direct = d;\n}\n")
        planted_static = static_hooks(os.path.join(tmp, "src-hooks"))
        for n in ("planted_typed", "planted_direct"):
            if not any(e.endswith(" " + n) for e in planted_static):
                print("FAIL: self-test: a static function pointer with a setter (%s) passed" % n)
                return 1
        for e in planted_static:
            print("self-test: caught " + e)
    print("ok: self-test: a planted upward call, a core call of the pool, the pool using an "
          "internal, a planted hook, planted static hooks and a private include make the "
          "check fail")
    return 0


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    top = args[0] if args else os.environ.get("top_builddir", ".")
    srcdir = os.environ.get("top_srcdir", os.path.join(os.path.dirname(__file__), ".."))
    rc = check(top, srcdir)
    if rc == 0 and ("--self-test" in sys.argv or not args):
        rc = self_test(top, srcdir)
    return rc


if __name__ == "__main__":
    sys.exit(main())
