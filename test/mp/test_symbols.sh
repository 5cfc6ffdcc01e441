#!/bin/sh
# The library as NCCL sees it: the plugin tables are exported, nothing else
# is, and no CUDA library is linked (the driver is opened at run time).
lib="$1"
n=0
fail=0
check() {
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		fail=1
	fi
}

echo "1..6"
syms=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort | tr '\n' ' ')
want="ncclEnvPlugin_v1 ncclNetPlugin_v10 ncclNetPlugin_v11 ncclNetPlugin_v8 ncclNetPlugin_v9 ncclTunerPlugin_v3 ncclTunerPlugin_v4 ncclTunerPlugin_v5 "
[ "$syms" = "$want" ]; check $? "exports exactly the env v1, net v8-v11 and tuner v3-v5 tables (got: $syms)"
needed=$(readelf -d "$lib" | grep NEEDED)
echo "$needed" | grep -Eq 'libcuda|libcudart|libnccl|libibverbs'
[ $? -ne 0 ]; check $? "no libcuda, libcudart, libnccl or libibverbs in DT_NEEDED"
out=$(ldd "$lib" 2>&1)
echo "$out" | grep -Eq 'libcuda|libcudart'
[ $? -ne 0 ]; check $? "ldd shows no libcuda or libcudart"
echo "$out" | grep -q 'not found'
[ $? -ne 0 ]; check $? "every dependency resolves"
[ "$(basename "$lib")" = "libnccl-net-symmem.so" ]; check $? "file name is what NCCL_NET_PLUGIN=symmem opens"
env_lib="$(dirname "$lib")/libnccl-env-symmem.so"
[ -L "$env_lib" ] && [ "$(readlink -f "$env_lib")" = "$(readlink -f "$lib")" ]
check $? "libnccl-env-symmem.so (what NCCL_ENV_PLUGIN=symmem opens) links to it"
exit $fail
