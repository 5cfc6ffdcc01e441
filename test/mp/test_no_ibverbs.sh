#!/bin/sh
# A host without libibverbs-dev still builds: configured with the ibverbs
# backend forced off (-Dibverbs=disabled), the libraries and symmem-info
# build, the build defines no SYMMEM_HAVE_VERBS, and symmem-info --json
# says the backend is left out and that other hosts go over TCP.
# $1: the source root, $2: a build folder of its own, $3: cuda.h's folder.
src="$1"
build="$2"
. "$(dirname "$0")/tap.sh"

echo "1..4"
if [ ! -d "$build" ]; then
	meson setup "$build" "$src" -Dibverbs=disabled -Dtests=disabled \
		-Dtoolkit_include="$3" >"$build.log" 2>&1
else
	meson configure "$build" -Dibverbs=disabled >"$build.log" 2>&1
fi
check $? "meson setup -Dibverbs=disabled" || cat "$build.log"
meson compile -C "$build" >>"$build.log" 2>&1
check $? "the libraries, the helper and symmem-info build" || tail -30 "$build.log"
! grep -q SYMMEM_HAVE_VERBS "$build/compile_commands.json"
check $? "no file is built with SYMMEM_HAVE_VERBS"
"$build/symmem-info" --json 2>/dev/null | python3 -c '
import json, sys
r = json.load(sys.stdin)["rdma"]
ok = r["ibverbs_backend"] is False and "no ibverbs backend" in (r["why_none"] or "") \
	and r["other_hosts"].startswith("TCP")
sys.exit(0 if ok else 1)'
check $? "symmem-info --json: ibverbs_backend false, why_none says so, other hosts over TCP"
exit $fail
