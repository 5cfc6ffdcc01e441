#!/bin/sh
# rdma_vm.sh [--tap] 'COMMAND': runs COMMAND (a shell command line, in the
# current directory) inside a small VM whose kernel has an RDMA device:
# Soft-RoCE (rdma_rxe) on the VM's network card, named rxe0, and a second
# one, far0, on a dummy network card (10.9.9.1): one machine's two
# Soft-RoCE devices do not route to each other, so far0 is a port that
# cannot reach rxe0, as between fabrics or rails.  No machine
# this project can use has an RDMA NIC, and the sandbox kernels have no
# RDMA subsystem; Debian's kernel under qemu has both, so the ibverbs
# backend is tested on real verbs, queue pairs and RDMA writes.
#
# The VM boots Debian's current amd64 kernel with a busybox initramfs and
# sees this machine's whole file system over 9p (read-write: the command
# runs as root in a chroot of it, so build outputs and logs land here).
# Needs root (qemu's 9p passthrough); about 15 s per run under TCG, no KVM
# needed.  `rdma_vm.sh --prepare` (run by scripts/deps.sh for the tests)
# installs the Debian packages and fetches the kernel into
# $SYMMEM_RDMA_VM_DIR (default /var/tmp/symmem-rdma-vm); a run installs
# and downloads nothing.  Each checkout runs its VM in a folder of its own
# under that one, so two checkouts never wait on each other.
#
# Exit status: COMMAND's.  When the VM cannot be made (not root, not
# prepared, qemu fails, this checkout's VM busy) it exits 77 (meson's
# "skipped"); with --tap it prints "1..0 # SKIP <reason>" and exits 0
# instead, for TAP test suites.
set -u
tap=0
prepare=0
case ${1:-} in
--tap) tap=1; shift ;;
--prepare) prepare=1; shift ;;
esac
[ $# -eq 1 ] || [ $prepare = 1 ] || { echo "usage: $0 [--tap] 'COMMAND' | --prepare" >&2; exit 2; }
top=${SYMMEM_RDMA_VM_DIR:-/var/tmp/symmem-rdma-vm}
kdir="$top/kernel"

skip() {
	if [ $tap = 1 ]; then
		echo "1..0 # SKIP no Soft-RoCE VM: $*"
		exit 0
	fi
	echo "rdma_vm.sh: no Soft-RoCE VM: $*" >&2
	exit 77
}

missing() {
	need=""
	command -v qemu-system-x86_64 >/dev/null 2>&1 || need="$need qemu-system-x86"
	[ -x /bin/busybox ] || need="$need busybox-static"
	command -v modprobe >/dev/null 2>&1 || need="$need kmod"
	[ -f /etc/libibverbs.d/rxe.driver ] || need="$need ibverbs-providers"
	command -v rdma >/dev/null 2>&1 || need="$need iproute2"
	command -v flock >/dev/null 2>&1 || need="$need util-linux"
}

[ "$(id -u)" = 0 ] || skip "needs root"
missing
if [ $prepare = 1 ]; then
	if [ -n "$need" ]; then
		export DEBIAN_FRONTEND=noninteractive
		# shellcheck disable=SC2086
		apt-get install -y -qq $need >/dev/null 2>&1 ||
			{ apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq $need >/dev/null 2>&1; } ||
			skip "could not install$need"
	fi
	mkdir -p "$top" || skip "cannot make $top"
	# Checkouts preparing at once take turns; the kernel is written once.
	exec 8>"$top/kernel.lock" && flock -w 300 8 || skip "cannot lock $top/kernel.lock"
	if [ ! -f "$kdir/ok" ]; then
		pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}')
		[ -n "$pkg" ] || skip "no linux-image-amd64 package"
		rm -rf "$kdir" && mkdir -p "$kdir" || skip "cannot make $kdir"
		(cd "$top" && rm -f ./*.deb && apt-get download "$pkg" >/dev/null 2>&1) ||
			skip "could not download $pkg"
		dpkg -x "$top"/"$pkg"_*.deb "$kdir" || skip "could not unpack $pkg"
		rm -f "$top"/*.deb
		touch "$kdir/ok"
	fi
	exit 0
fi
[ -z "$need" ] || skip "missing$need (scripts/rdma_vm.sh --prepare installs them)"
[ -f "$kdir/ok" ] || skip "no kernel in $kdir (scripts/rdma_vm.sh --prepare fetches it)"
# This checkout's own folder: its initramfs, guest script and output.
repo=$(cd "$(dirname "$0")/.." && pwd)
dir="$top/run-$(printf '%s' "$repo" | cksum | cut -d' ' -f1)"
mkdir -p "$dir" || skip "cannot make $dir"
exec 9>"$dir/lock" || skip "cannot open $dir/lock"
flock -n 9 || skip "another run of this checkout ($repo) holds $dir/lock"
kver=$(ls "$kdir/lib/modules" | head -1)
vmlinuz="$kdir/boot/vmlinuz-$kver"
[ -f "$vmlinuz" ] || skip "no kernel in $kdir"

# The initramfs: busybox, the modules for virtio, 9p and Soft-RoCE, and
# an init that mounts this machine's root and runs the command there.
ird="$dir/initramfs"
rm -rf "$ird" && mkdir -p "$ird/bin" "$ird/proc" "$ird/sys" "$ird/dev" "$ird/host" || skip "no room"
cp /bin/busybox "$ird/bin/"
depmod -b "$kdir" "$kver" || skip "depmod failed"
mods="crc32_generic virtio_pci virtio_net 9pnet_virtio 9p rdma_rxe ib_uverbs dummy"
for m in $mods; do
	modprobe -d "$kdir" -S "$kver" --show-depends "$m"
done | awk '/^insmod/ {print $2}' | sort -u | while read -r f; do
	rel=${f#"$kdir"}
	mkdir -p "$ird/$(dirname "$rel")" && cp "$f" "$ird/$rel"
done
cp "$kdir/lib/modules/$kver"/modules.* "$ird/lib/modules/$kver/"
cat >"$ird/init" <<EOF
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $mods; do modprobe \$m || echo "rdma_vm: modprobe \$m failed"; done
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 hostroot /host
ip link set lo up
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
# Loading "dummy" may have made dummy0 already.
ip link show dummy0 >/dev/null 2>&1 || ip link add dummy0 type dummy
ip link set dummy0 up && ip addr add 10.9.9.1/24 dev dummy0
mount -t proc proc /host/proc
mount -t sysfs sys /host/sys
mount -t devtmpfs dev /host/dev
mount -t tmpfs shm /host/dev/shm
chroot /host /bin/sh $dir/guest.sh
poweroff -f
EOF
chmod +x "$ird/init"
(cd "$ird" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1 >"$dir/initrd.gz") ||
	skip "could not pack the initramfs"

# In the guest: the RDMA device, then the command; its output and status
# come back through the shared file system.  The command's processes
# write into a pipe and one cat writes the file: with several of them
# appending to the 9p file directly, an ASan run once got a stretch of
# TAP lines twice ("ok 10" ... "ok 10"), which fails the TAP parse.
rm -f "$dir/status" "$dir/out.log"
cat >"$dir/guest.sh" <<EOF
rdma link add rxe0 type rxe netdev eth0 >"$dir/out.log" 2>&1 || { echo setup >"$dir/status"; exit; }
rdma link add far0 type rxe netdev dummy0 >/dev/null 2>&1 || echo "rdma_vm: no far0 (its tests skip)"
cd "$(pwd)" && { ( $1 ); echo \$? >"$dir/status"; } 2>&1 | cat >>"$dir/out.log"
EOF
timeout "${SYMMEM_RDMA_VM_TIMEOUT:-900}" qemu-system-x86_64 -accel tcg -smp 2 -m 3072 \
	-nographic -no-reboot -kernel "$vmlinuz" -initrd "$dir/initrd.gz" \
	-append "console=ttyS0 quiet panic=-1" \
	-virtfs local,path=/,mount_tag=hostroot,security_model=passthrough,id=hr,multidevs=remap \
	-nic user,model=virtio-net-pci >"$dir/console.log" 2>&1
status=$(cat "$dir/status" 2>/dev/null)
case "$status" in
"") skip "the VM did not run the command (console: $dir/console.log)" ;;
setup) skip "rdma link add failed: $(head -c 200 "$dir/out.log")" ;;
esac
cat "$dir/out.log"
exit "$status"
