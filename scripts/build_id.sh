#!/bin/sh
# Prints the build id every binary carries (plugin/build_id.h):
# "VERSION (COMMIT)", COMMIT as `git describe` names it ("+" when the tree
# had changes).  git is asked only when SRC is the top of its own
# repository: a tree exported into another repository must not take that
# one's commit.  A tree exported by `git archive` has its commit in
# SRC/VERSION (.gitattributes: export-subst); else VERSION alone.
# Usage: scripts/build_id.sh SRC VERSION   (meson's vcs_tag runs it)
src=$(cd "$1" && pwd -P) || exit 1
top=$(git -C "$src" rev-parse --show-toplevel 2>/dev/null) && top=$(cd "$top" && pwd -P)
if [ "$top" = "$src" ] && id=$(git -C "$src" describe --always --dirty=+ 2>/dev/null); then
	echo "$2 ($id)"
elif id=$(sed -n 's/^commit \([0-9a-f]\{7,40\}\)$/\1/p' "$src/VERSION" 2>/dev/null) &&
	[ -n "$id" ]; then
	echo "$2 ($id)"
else
	echo "$2"
fi
