#!/bin/bash
# One call on a GPU host: build the plugin and the NCCL check driver, run
# collectives natively and through the plugin in the same invocation, check
# every result, and prove from NCCL's own log that traffic went through
# NET/symmem.  Logs go to $OUT (default /tmp/symmem-gpu).
# Usage: scripts/gpu_check.sh [max_bytes]
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/symmem-gpu}
MAX=${1:-268435456}
mkdir -p "$OUT"
# NVLink multicast stays off on shared hosts.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
fail=0
note() { echo "== $*"; }

nvidia-smi -L | tee "$OUT/gpus.txt"
nvidia-smi topo -m >"$OUT/topo.txt" 2>&1
meson setup build-gpu -Dtests=disabled --buildtype=release -Dwerror=false >"$OUT/build.log" 2>&1 &&
	ninja -C build-gpu >>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }

NCCL_H=$(find /usr/include /usr/local/cuda/include /opt/torch -name nccl.h 2>/dev/null | head -1)
NCCL_SO=$(ls /usr/lib/x86_64-linux-gnu/libnccl.so.2 2>/dev/null ||
	find /opt/torch -name 'libnccl.so.2' 2>/dev/null | head -1)
note "nccl.h: $NCCL_H  libnccl: $NCCL_SO"
gcc -std=c11 -O2 -D_GNU_SOURCE -I"$(dirname "$NCCL_H")" -I/usr/local/cuda/include \
	test/nccl/nccl_check.c "$NCCL_SO" -L/usr/local/cuda/lib64 -lcudart \
	-Wl,-rpath,"$(dirname "$NCCL_SO")":/usr/local/cuda/lib64 -o build-gpu/nccl_check \
	>>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }

export LD_LIBRARY_PATH="$PWD/build-gpu:${LD_LIBRARY_PATH:-}"
PLUGIN_ENV="NCCL_NET_PLUGIN=symmem NCCL_NET=symmem NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1"
DEBUG_ENV="NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,NET"

# run NAME "ENV..." ARGS...: one driver invocation, logged.
run() {
	local name=$1 envs=$2
	shift 2
	note "$name: $envs nccl_check $*"
	if ! env $envs timeout 300 ./build-gpu/nccl_check "$@" >"$OUT/$name.log" 2>&1; then
		echo "FAILED: $name"; tail -5 "$OUT/$name.log"; fail=1
	fi
	grep -vE 'NCCL (INFO|WARN)' "$OUT/$name.log" | grep -E '^ |^#|correct|FAILED' | tail -12
}

# A plugin run must show the plugin in use and no P2P/SHM channel.
prove() {
	local log="$OUT/$1.log"
	grep -m1 'Using network symmem' "$log" || { echo "MISSING 'Using network symmem' in $1"; fail=1; }
	grep -m2 'via NET/symmem' "$log" || { echo "MISSING 'via NET/symmem' in $1"; fail=1; }
	if grep -E 'via (P2P|SHM)|via NET/(Socket|IB)' "$log" | head -3 | grep .; then
		echo "traffic outside NET/symmem in $1"; fail=1
	fi
}

run native-allreduce "NCCL_DEBUG=WARN" -c allreduce -b 8 -e "$MAX"
run plugin-allreduce "$PLUGIN_ENV $DEBUG_ENV" -c allreduce -b 8 -e "$MAX"
prove plugin-allreduce
for proto in Simple LL LL128; do
	run "plugin-allreduce-$proto" "$PLUGIN_ENV $DEBUG_ENV NCCL_PROTO=$proto" -c allreduce -b 8 -e 16777216 -i 5
	prove "plugin-allreduce-$proto"
done
run native-allgather "NCCL_DEBUG=WARN" -c allgather -b 8 -e 67108864
run plugin-allgather "$PLUGIN_ENV $DEBUG_ENV" -c allgather -b 8 -e 67108864
prove plugin-allgather
run native-sendrecv "NCCL_DEBUG=WARN" -c sendrecv -b 8 -e 67108864
run plugin-sendrecv "$PLUGIN_ENV $DEBUG_ENV" -c sendrecv -b 8 -e 67108864
prove plugin-sendrecv
run plugin-allreduce-tcp "$PLUGIN_ENV $DEBUG_ENV NCCL_SYMMEM_BACKEND=tcp" -c allreduce -b 8 -e 16777216 -i 5
prove plugin-allreduce-tcp

note "pytorch all_reduce through the plugin"
PY=$(command -v python3)
[ -x /opt/torch/.venv/bin/python3 ] && PY=/opt/torch/.venv/bin/python3
if ! env $PLUGIN_ENV $DEBUG_ENV timeout 300 "$PY" scripts/torch_allreduce.py >"$OUT/torch.log" 2>&1; then
	echo "FAILED: torch"; tail -20 "$OUT/torch.log"; fail=1
fi
grep -E 'all_reduce over|WRONG' "$OUT/torch.log"
prove torch

# The device tool brings back at most 8 files: pack the logs into one.
tar -C "$OUT" -czf "$OUT/logs.tgz" --exclude=logs.tgz . 2>/dev/null
find "$OUT" -maxdepth 1 -name '*.log' -delete
note "result: $([ $fail = 0 ] && echo PASS || echo FAIL)"
exit $fail
