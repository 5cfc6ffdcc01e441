#!/bin/sh
# The multi-node recipe is one text, in README.md and docs/multi-node.md
# alike, between the same two markers: a change to one must reach the
# other.  $1: README.md, $2: docs/multi-node.md.
. "$(dirname "$0")/tap.sh"

recipe() {
	sed -n '/^<!-- multi-node recipe:/,/^<!-- end of multi-node recipe -->/p' "$1"
}

echo "1..3"
[ -n "$(recipe "$1")" ]
check $? "README.md has the recipe"
[ -n "$(recipe "$2")" ]
check $? "docs/multi-node.md has the recipe"
[ "$(recipe "$1")" = "$(recipe "$2")" ]
check $? "the two are the same text"
exit $fail
