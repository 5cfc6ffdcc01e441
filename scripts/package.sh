#!/bin/sh
# Builds the Debian package for cluster and container images,
# libnccl-net-symmem_<version>_<arch>.deb, with dpkg-deb: both plugins
# (libnccl-net-symmem.so, libnccl-env-symmem.so) in /usr/lib/<triplet>,
# the copy helper /usr/libexec/symmem-copyd, /usr/bin/symmem-info, the
# pkg-config file and the copyright file.  A release build in BUILD
# (default build-package/, --prefix=/usr), installed with DESTDIR into a
# staging folder.  Install it with `dpkg -i`, or `apt-get install ./FILE`.
# Usage: scripts/package.sh [OUTDIR]   (default: the source root)
set -e
src=$(cd "$(dirname "$0")/.." && pwd)
out=$(cd "${1:-$src}" && pwd)
build=${BUILD:-$src/build-package}
for tool in meson dpkg-deb dpkg; do
	command -v $tool >/dev/null 2>&1 ||
		{ echo "package.sh: $tool not found (Debian packages meson, dpkg)" >&2; exit 1; }
done
[ -d "$build" ] || meson setup "$build" "$src" --buildtype=release --prefix=/usr \
	-Dtests=disabled >"$out/package-setup.log" 2>&1 ||
	{ cat "$out/package-setup.log" >&2; exit 1; }
rm -f "$out/package-setup.log"
meson compile -C "$build" >/dev/null
version=$(meson introspect "$build" --projectinfo |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
arch=$(dpkg --print-architecture)
name=libnccl-net-symmem
stage=$(mktemp -d /tmp/symmem-package-XXXXXX)
trap 'rm -rf "$stage"' EXIT
root="$stage/root"
meson install -C "$build" --no-rebuild --quiet --destdir "$root" >/dev/null
doc="$root/usr/share/doc/$name"
mkdir -p "$doc" "$root/DEBIAN"
cat >"$doc/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: $name
Source: the libnccl-net-symmem repository

Files: *
Copyright: the libnccl-net-symmem authors
License: Apache-2.0
 On Debian systems the full text of the Apache License, Version 2.0, is in
 /usr/share/common-licenses/Apache-2.0.
EOF
cat >"$root/DEBIAN/control" <<EOF
Package: $name
Version: $version
Architecture: $arch
Section: libs
Priority: optional
Maintainer: ${MAINTAINER:-libnccl-net-symmem maintainers <maintainers@localhost>}
Depends: libc6
Recommends: libibverbs1
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Description: NCCL net, tuner and env plugin moving GPU bytes with copy engines
 NCCL_ENV_PLUGIN=symmem (NCCL 2.28.7 or later) routes a job through it.
 symmem-info says what it would do on this host; symmem-info --selftest
 runs it through its own net table.
EOF
# The loader's cache learns of the libraries when the package comes and goes.
echo "activate-noawait ldconfig" >"$root/DEBIAN/triggers"
chmod -R u+rwX,go+rX,go-w "$root"
deb="$out/${name}_${version}_${arch}.deb"
dpkg-deb --root-owner-group --build "$root" "$deb" >/dev/null
echo "$deb"
