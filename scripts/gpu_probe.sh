#!/bin/bash
# Driver/hardware probe behind the copy-helper design (test/probe/ce_probe.cu):
# can another process drive GPU0's copy engines while this one computes, and
# what blocks a CUDA call while graph replays are queued; 'kinds': which copy
# kinds another process's kernels hold up ('kinds-sizes': host copies by size, 'kinds-small': small host-to-GPU copies by shape); 'multi': every GPU pushing to one,
# two or all of its peers at once; 'shapes': one copy per piece against a
# batch call, a 2D copy across allocations and one 1D copy (ce_shapes.cu); 'ipc':
# copies between legacy-IPC, cuMem-fd and own memory, as the helper maps them.  Output to stdout.
set -u
cd "$(dirname "$0")/.."
mkdir -p build-gpu
nvcc -O2 -arch=sm_90 test/probe/ce_probe.cu -o build-gpu/ce_probe -L/usr/local/cuda/lib64/stubs -lcuda || exit 1
if [ "${1:-}" = shapes ]; then
	nvcc -O2 -arch=sm_90 test/probe/ce_shapes.cu -o build-gpu/ce_shapes -L/usr/local/cuda/lib64/stubs -lcuda || exit 1
	timeout 300 ./build-gpu/ce_shapes 2 && timeout 300 ./build-gpu/ce_shapes
	exit
fi
[ "${1:-}" = kinds ] && { timeout 300 ./build-gpu/ce_probe kinds; exit; }
[ "${1:-}" = kinds-sizes ] && { timeout 300 ./build-gpu/ce_probe kinds-sizes; exit; }
[ "${1:-}" = kinds-small ] && { timeout 300 ./build-gpu/ce_probe kinds-small; exit; }
[ "${1:-}" = ipc ] && { timeout 300 ./build-gpu/ce_probe ipc; timeout 300 ./build-gpu/ce_probe ipc-bidir; exit; }
[ "${1:-}" = bidir ] && { timeout 300 ./build-gpu/ce_probe bidir; exit; }
[ "${1:-}" = multi ] && { timeout 300 ./build-gpu/ce_probe multi; timeout 300 ./build-gpu/ce_probe multi-cumem; MULTI_GPUS=$(nvidia-smi -L | wc -l) timeout 300 ./build-gpu/ce_probe multi-proc; exit; }
timeout 120 ./build-gpu/ce_probe xproc
for h in 0 1; do
	for n in 8 64 2048; do
		timeout 60 ./build-gpu/ce_probe graph $h $n || echo "graph $h $n: exit $?"
	done
done
