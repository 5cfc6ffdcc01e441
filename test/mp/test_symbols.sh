#!/bin/sh
# The libraries as NCCL sees them: the net plugin exports its net and
# tuner tables, the env plugin beside it its env table, nothing else is
# exported, and no CUDA library is linked (the driver is opened at run
# time).  $1: the net plugin; the env plugin sits in the same directory.
lib="$1"
env_lib="$(dirname "$lib")/libnccl-env-symmem.so"
. "$(dirname "$0")/tap.sh"

exports() {
	nm -D --defined-only "$1" | awk '{print $3}' | sort | tr '\n' ' '
}

echo "1..9"
syms=$(exports "$lib")
want="ncclNetPlugin_v10 ncclNetPlugin_v11 ncclNetPlugin_v12 ncclNetPlugin_v8 ncclNetPlugin_v9 ncclTunerPlugin_v2 ncclTunerPlugin_v3 ncclTunerPlugin_v4 ncclTunerPlugin_v5 ncclTunerPlugin_v6 ncclTunerPlugin_v7 "
[ "$syms" = "$want" ]; check $? "the net plugin exports exactly the net v8-v12 and tuner v2-v7 tables (got: $syms)"
syms=$(exports "$env_lib")
[ "$syms" = "ncclEnvPlugin_v1 ncclEnvPlugin_v2 " ]; check $? "the env plugin exports exactly the env v1 and v2 tables (got: $syms)"
for l in "$lib" "$env_lib"; do
	needed=$(readelf -d "$l" | grep NEEDED)
	echo "$needed" | grep -Eq 'libcuda|libcudart|libnccl|libibverbs'
	[ $? -ne 0 ]; check $? "$(basename "$l"): no libcuda, libcudart, libnccl or libibverbs in DT_NEEDED"
	out=$(ldd "$l" 2>&1)
	echo "$out" | grep -Eq 'libcuda|libcudart'
	[ $? -ne 0 ]; check $? "$(basename "$l"): ldd shows no libcuda or libcudart"
	echo "$out" | grep -q 'not found'
	[ $? -ne 0 ]; check $? "$(basename "$l"): every dependency resolves"
done
# Two files: ldconfig caches one name per file, so a link would not be
# found once installed.
[ "$(basename "$lib")" = "libnccl-net-symmem.so" ] && [ -f "$env_lib" ] && [ ! -L "$env_lib" ]
check $? "file names are what NCCL_NET_PLUGIN=symmem and NCCL_ENV_PLUGIN=symmem open, two files"
exit $fail
