#!/bin/sh
# The installed layout as the loader finds it: both plugins in the library
# directory, each found by the name NCCL asks for (libnccl-net-symmem.so
# for NCCL_NET_PLUGIN=symmem, libnccl-env-symmem.so for
# NCCL_ENV_PLUGIN=symmem) in a loader cache built by ldconfig, the copy
# helper in libexec, symmem-info in bin.  A link from one name to the
# other is not cached (ldconfig keeps one name per file), so this failed
# while the env plugin was a link.  Installs into a scratch DESTDIR and builds a private cache
# there: the machine's own cache is not touched.  $1: the build directory.
build="$1"
tmp=$(mktemp -d /tmp/symmem-install-XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/tap.sh"

ldconfig=$(command -v ldconfig || echo /sbin/ldconfig)
if [ ! -x "$ldconfig" ]; then
	echo "1..0 # SKIP no ldconfig"
	exit 0
fi
echo "1..6"
meson install -C "$build" --no-rebuild --quiet --destdir "$tmp/root" >"$tmp/install.log" 2>&1
check $? "meson install into a scratch DESTDIR"
net=$(find "$tmp/root" -name libnccl-net-symmem.so | head -1)
libdir=$(dirname "${net:-/nonexistent/x}")
[ -f "$libdir/libnccl-env-symmem.so" ] && [ ! -L "$libdir/libnccl-env-symmem.so" ]
check $? "libnccl-env-symmem.so is a file of its own beside libnccl-net-symmem.so"
[ -x "$(find "$tmp/root" -path '*/libexec/symmem-copyd' | head -1)" ]
check $? "symmem-copyd in libexec"
[ -x "$(find "$tmp/root" -path '*/bin/symmem-info' | head -1)" ]
check $? "symmem-info in bin"
echo "$libdir" >"$tmp/ld.conf"
"$ldconfig" -X -C "$tmp/ld.cache" -f "$tmp/ld.conf" >"$tmp/ldconfig.log" 2>&1
cached=$("$ldconfig" -p -C "$tmp/ld.cache" 2>/dev/null)
echo "$cached" | grep -q "libnccl-net-symmem.so .*=> $libdir/libnccl-net-symmem.so"
check $? "the loader cache finds libnccl-net-symmem.so (NCCL_NET_PLUGIN=symmem)"
echo "$cached" | grep -q "libnccl-env-symmem.so .*=> $libdir/libnccl-env-symmem.so"
check $? "the loader cache finds libnccl-env-symmem.so (NCCL_ENV_PLUGIN=symmem)"
exit $fail
