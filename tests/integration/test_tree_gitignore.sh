#!/usr/bin/env bash
# .gitignore covers every file the build and the tests make, so that after
# the README's in-tree build `git status` shows only one's own changes:
#  - a build in its own directory (CI's build/): every file in it, taken as
#    if it were at the same place in the source tree, is ignored by the
#    source tree's .gitignore (git check-ignore --no-index);
#  - an in-tree build (the README's): git reports no file that is neither
#    tracked nor ignored.
# Runs while the other tests run, so their outputs (logs, results) are
# checked as well as can be.  Skips outside a git checkout (a tarball).
. "$(dirname "$0")/lib.sh"

command -v git >/dev/null || skip "no git (apt-get install git)"
[[ -n ${top_builddir:-} && -f $top_builddir/Makefile ]] || skip "no build tree (top_builddir is not set)"
git -C "$top_srcdir" rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
    skip "not a git checkout but a distribution tree (make distcheck): .gitignore is checked by the checkout's own make check"
src=$(cd "$top_srcdir" && pwd -P)
# (make distcheck unpacks the tarball inside the checkout's build/)
[[ $(cd "$(git -C "$src" rev-parse --show-toplevel)" && pwd -P) == "$src" ]] ||
    skip "not a git checkout but a distribution tree (make distcheck): .gitignore is checked by the checkout's own make check"
build=$(cd "$top_builddir" && pwd -P)

if [[ $build == "$src" ]]; then
    mapfile -t bad < <(git -C "$src" ls-files --others --exclude-standard)
    ((${#bad[@]} == 0)) || fail "after the in-tree build, git status lists ${#bad[@]} untracked files that .gitignore does not cover: ${bad[*]:0:20} (a build output: add it to .gitignore; a new file of yours: git add it)"
    ok "in-tree build: every file the build made is ignored (git status lists none)"
    exit 0
fi

# the build directory inside the checkout (build/) is ignored as a whole
# there; each file is checked at its place relative to the build directory
mapfile -t files < <(cd "$build" && find . -type f ! -path './.git/*' -printf '%P\n' | LC_ALL=C sort)
((${#files[@]} > 50)) || fail "only ${#files[@]} files in the build tree $build"
mapfile -t ignored < <(printf '%s\n' "${files[@]}" | git -C "$src" check-ignore --no-index --stdin |
    LC_ALL=C sort)
mapfile -t bad < <(comm -23 <(printf '%s\n' "${files[@]}") <(printf '%s\n' "${ignored[@]}"))
((${#bad[@]} == 0)) || fail "${#bad[@]} files the build made would show in git status after an in-tree build: ${bad[*]:0:20} (add them to .gitignore)"
ok "every one of the ${#files[@]} files of the build tree is covered by .gitignore"
