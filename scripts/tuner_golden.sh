#!/bin/sh
# Rewrites the tuner's golden files (test/mp/golden/) from the built
# library after a deliberate policy change; review the diff before
# committing it.  Needs `sh scripts/test.sh` to have built build-test/.
set -e
cd "$(dirname "$0")/.."
lib=$PWD/build-test/libnccl-net-symmem.so
bin=build-test/test/mp/test_tuner
g=test/mp/golden
mkdir -p $g
# Only the variables each file is about; the caller's own are dropped.
run() {
	env -u NCCL_PASS_SM -u NCCL_SYMMEM_PASS_SM_CHANNELS -u NCCL_P2P_DISABLE -u NCCL_PROTO \
		-u NCCL_SYMMEM_LL128_CHUNK -u NCCL_SYMMEM_LL_MAX -u NCCL_SYMMEM_NCCL_DEFAULTS -u NCCL_MIN_NCHANNELS \
		-u NCCL_MAX_NCHANNELS -u NCCL_MIN_NRINGS -u NCCL_MAX_NRINGS -u NCCL_MIN_CTAS \
		-u NCCL_MAX_CTAS SYMMEM_PLUGIN=$lib "$@" \
		$bin --print
}
run >$g/tuner-default.txt
run NCCL_SYMMEM_LL_MAX=1MiB >$g/tuner-ll-max-1m.txt
run NCCL_SYMMEM_NCCL_DEFAULTS=0 >$g/tuner-untouched.txt
run NCCL_PASS_SM=1 >$g/tuner-pass-sm.txt
run NCCL_PASS_SM=1 NCCL_SYMMEM_PASS_SM_CHANNELS=5 >$g/tuner-pass-sm-5.txt
run NCCL_P2P_DISABLE=1 >$g/tuner-intra-host.txt
run NCCL_P2P_DISABLE=1 NCCL_PASS_SM=1 >$g/tuner-intra-host-pass-sm.txt
run NCCL_P2P_DISABLE=1 NCCL_SYMMEM_LL128_CHUNK=1MiB >$g/tuner-intra-host-1m.txt
run NCCL_P2P_DISABLE=1 NCCL_MAX_CTAS=8 >$g/tuner-intra-host-max8.txt
run NCCL_P2P_DISABLE=1 NCCL_PASS_SM=1 NCCL_SYMMEM_PASS_SM_CHANNELS=16 NCCL_MAX_NCHANNELS=8 \
	>$g/tuner-intra-host-max8-pass-sm.txt
git diff --stat -- $g
