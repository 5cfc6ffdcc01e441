#!/bin/sh
# Builds libnccl-net-symmem.so and installs it where NCCL_NET_PLUGIN=symmem
# finds it (a library directory on the loader path), with the env plugin
# libnccl-env-symmem.so beside it that NCCL_ENV_PLUGIN=symmem opens, its
# copy helper symmem-copyd (libexec), symmem-info (bin: what the plugin
# would do on this host, and --selftest), plus a pkg-config file.
# Usage: scripts/install.sh [meson setup options, e.g. --prefix=/opt/symmem]
set -e
cd "$(dirname "$0")/.."
deps_for=build
. scripts/deps.sh
if [ -d build-release ]; then
	# An existing build keeps its settings unless new options are given.
	[ $# -eq 0 ] || meson configure build-release "$@"
else
	meson setup build-release --buildtype=release --prefix=/usr/local -Dtests=disabled "$@"
fi
meson compile -C build-release
if [ "$(id -u)" = 0 ]; then
	meson install -C build-release
	ldconfig
else
	sudo meson install -C build-release
	sudo ldconfig
fi
echo "installed: $(meson introspect build-release --installed | python3 -c 'import json,sys; print(" ".join(v for v in json.load(sys.stdin).values() if v.endswith((".so", "/symmem-copyd", "/symmem-info"))))')"
echo "check this host: symmem-info, and symmem-info --selftest (docs/symmem-info.md)"
echo "use it: export NCCL_ENV_PLUGIN=symmem (NCCL 2.28.7 or later; older NCCL: README, \"Use it\")"
