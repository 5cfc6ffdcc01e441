#!/bin/sh
# Rewrites the tuner's golden files (test/mp/golden/) from the built
# library after a deliberate policy change; review the diff before
# committing it.  Needs `sh scripts/test.sh` to have built build-test/.
set -e
cd "$(dirname "$0")/.."
lib=$PWD/build-test/libnccl-net-symmem.so
bin=build-test/test/mp/test_tuner
mkdir -p test/mp/golden
env -u NCCL_PASS_SM -u NCCL_SYMMEM_PASS_SM_CHANNELS SYMMEM_PLUGIN=$lib $bin --print \
	>test/mp/golden/tuner-default.txt
env -u NCCL_SYMMEM_PASS_SM_CHANNELS SYMMEM_PLUGIN=$lib NCCL_PASS_SM=1 $bin --print \
	>test/mp/golden/tuner-pass-sm.txt
SYMMEM_PLUGIN=$lib NCCL_PASS_SM=1 NCCL_SYMMEM_PASS_SM_CHANNELS=5 $bin --print \
	>test/mp/golden/tuner-pass-sm-5.txt
git diff --stat -- test/mp/golden
