#!/usr/bin/python3
"""check_layers.py -- the library's files call each other without circles.

For every object file of libpetrel (the core library's objects in
$top_builddir/src/.libs, or the directory given), `nm` says which symbols it
defines and which it uses; a file depends on the file that defines a symbol
it uses.  The dependency graph among the library's files must have no cycle
(doc/architecture.md, "Layers").  Prints the files in dependency order,
bottom first, and exits 1 with the cycle when there is one.
"""
import os
import subprocess
import sys

def symbols(obj):
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defs, uses = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TDBRC":
            defs.add(parts[2])
        elif len(parts) == 2 and parts[0] == "U":
            uses.add(parts[1])
    return defs, uses

def main():
    top = os.environ.get("top_builddir", ".")
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(top, "src")
    # the library's own objects: what libpetrel-core is made of (not the
    # bundled llhttp, not the command or the load generator)
    objs = sorted(os.path.relpath(os.path.join(r, f), d) for r, _, fs in os.walk(d)
                  for f in fs if f.endswith(".o") and "llhttp" not in f and "/.libs" in r + "/"
                  and "/bench" not in r)
    if not objs:
        print("no object files in %s" % d)
        return 1
    defs, uses = {}, {}
    for f in objs:
        name = os.path.basename(f)[:-2]
        defs[name], uses[name] = symbols(os.path.join(d, f))
    owner = {s: n for n, ds in defs.items() for s in ds}
    deps = {n: sorted({owner[s] for s in us if s in owner and owner[s] != n}) for n, us in uses.items()}
    # depth-first search for a cycle, and a topological order
    order, state, stack = [], {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in deps[n]:
            if state.get(m) == 1:
                cyc = stack[stack.index(m):] + [m]
                print("cycle: " + " -> ".join(cyc))
                for a, b in zip(cyc, cyc[1:]):
                    why = sorted(s for s in uses[a] if owner.get(s) == b)
                    print("  %s uses %s of %s" % (a, ", ".join(why[:6]), b))
                return False
            if state.get(m) is None and not visit(m):
                return False
        stack.pop()
        state[n] = 2
        order.append(n)
        return True

    for n in sorted(deps):
        if state.get(n) is None and not visit(n):
            return 1
    for n in order:
        print("%-12s -> %s" % (n, " ".join(deps[n]) or "-"))
    print("no cycle among %d files" % len(order))
    return 0

if __name__ == "__main__":
    sys.exit(main())
