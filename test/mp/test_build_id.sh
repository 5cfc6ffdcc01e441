#!/bin/sh
# Where a build came from: the build id names the tree's own commit, never
# that of a repository the tree was exported into.  Exports the source
# tree with `git archive` into a folder inside another git repository,
# configures it and reads the id meson writes into build_id.c: the commit
# the export carries in VERSION, or the version alone without that file.
# $1: the source root, $2: cuda.h's folder.
src="$1"
tmp=$(mktemp -d /tmp/symmem-buildid-XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/tap.sh"

head=$(git -C "$src" rev-parse HEAD 2>/dev/null)
if [ -z "$head" ] || [ "$(git -C "$src" rev-parse --show-toplevel)" != "$(cd "$src" && pwd -P)" ]; then
	echo "1..0 # SKIP the source root is not a git repository's top (an export)"
	exit 0
fi
version=$(sed -n "s/^ *version : '\([^']*\)'.*/\1/p" "$src/meson.build" | head -1)
echo "1..4"
# the id meson writes for source tree $1 (configured into $1/b)
id_of() {
	meson setup "$1/b" "$1" -Dtests=disabled -Dtoolkit_include="$2" >"$tmp/setup.log" 2>&1 &&
		ninja -C "$1/b" plugin/build_id.c >>"$tmp/setup.log" 2>&1 &&
		sed -n 's/.*BUILD_ID_MARKER "\(.*\)";/\1/p' "$1/b/plugin/build_id.c"
}

id=$(sh "$src/scripts/build_id.sh" "$src" "$version")
case $id in "$version ("*")") true ;; *) false ;; esac
check $? "the repository's own tree: its commit ($id)"

outer="$tmp/outer"
git init -q "$outer" && git -C "$outer" -c user.name=t -c user.email=t@t \
	commit -q --allow-empty -m outer
mkdir "$outer/src"
git -C "$src" archive HEAD | tar -x -C "$outer/src"
id=$(id_of "$outer/src" "$2")
short=${id#"$version ("}
short=${short%)}
[ -n "$short" ] && [ "$short" != "$id" ] && case $head in "$short"*) true ;; *) false ;; esac
check $? "an export inside another repository: its own commit from VERSION ($id)" ||
	tail -5 "$tmp/setup.log"
outer_head=$(git -C "$outer" rev-parse --short HEAD)
case $id in *"$outer_head"*) false ;; *) true ;; esac
check $? "not the enclosing repository's commit ($outer_head)"

rm -rf "$outer/src/b" "$outer/src/VERSION"
id=$(id_of "$outer/src" "$2")
[ "$id" = "$version" ]
check $? "without VERSION: the version alone ($id)" || tail -5 "$tmp/setup.log"
exit $fail
