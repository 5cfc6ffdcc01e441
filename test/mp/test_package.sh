#!/bin/sh
# The Debian package as an image build uses it: scripts/package.sh builds
# it, dpkg installs it into a clean root of its own (an empty admin
# folder, --root), symmem-info --json runs from there and names the
# installed library, and dpkg removes it leaving no file behind.  The
# machine's own dpkg database is not touched.
# $1: the source root, $2: a build folder for the package's release build.
src="$1"
tmp=$(mktemp -d /tmp/symmem-pkgtest-XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/tap.sh"

for tool in dpkg-deb dpkg python3; do
	if ! command -v $tool >/dev/null 2>&1; then
		echo "1..0 # SKIP no $tool (Debian's dpkg builds and installs the package)"
		exit 0
	fi
done
echo "1..7"
deb=$(BUILD="$2" sh "$src/scripts/package.sh" "$tmp" 2>"$tmp/package.log")
[ -f "$deb" ] && case $deb in */libnccl-net-symmem_*_*.deb) true ;; *) false ;; esac
check $? "scripts/package.sh makes libnccl-net-symmem_<version>_<arch>.deb"
[ -f "$deb" ] || cat "$tmp/package.log"

dpkg-deb -c "$deb" >"$tmp/list" 2>&1
ok=0
for f in /libnccl-net-symmem.so /libnccl-env-symmem.so /libexec/symmem-copyd /bin/symmem-info \
	/pkgconfig/nccl-net-symmem.pc /usr/share/doc/libnccl-net-symmem/copyright; do
	grep -q "$f\$" "$tmp/list" || { echo "# the package lacks $f"; ok=1; }
done
check $ok "it holds both libraries, the helper, symmem-info, pkg-config and copyright"

root="$tmp/root"
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/var/lib/dpkg/triggers"
: >"$root/var/lib/dpkg/status"
: >"$root/var/lib/dpkg/available"
# --force-depends: the clean root has no libc6 of its own to depend on.
dpkg --root="$root" --log=/dev/null --force-depends --force-not-root -i "$deb" \
	>"$tmp/install.log" 2>&1
check $? "dpkg installs it into a clean root" || cat "$tmp/install.log"

info=$(find "$root" -path '*/bin/symmem-info' | head -1)
lib=$(find "$root" -name libnccl-net-symmem.so | head -1)
LD_LIBRARY_PATH=$(dirname "${lib:-/nonexistent/x}") NCCL_NET_PLUGIN=symmem \
	"${info:-false}" --json >"$tmp/info.json" 2>"$tmp/info.err"
python3 - "$tmp/info.json" "$lib" <<'EOF'
import json, os, sys
d = json.load(open(sys.argv[1]))
path = d['files']['net_plugin']['path']
sys.exit(0 if os.path.realpath(path) == os.path.realpath(sys.argv[2]) else 1)
EOF
check $? "symmem-info --json from it parses and names the installed library"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(d["files"]["net_plugin"]["build"] != d["build"])' \
	"$tmp/info.json"
check $? "the installed library is symmem-info's own build"

dpkg --root="$root" --log=/dev/null --force-not-root -r libnccl-net-symmem >"$tmp/remove.log" 2>&1
check $? "dpkg removes it" || cat "$tmp/remove.log"
left=$(find "$root" ! -type d ! -path "$root/var/lib/dpkg/*")
[ -z "$left" ]
check $? "nothing of it is left but folders" || echo "# left: $left"
exit $fail
