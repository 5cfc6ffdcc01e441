#!/bin/sh
# Run inside scripts/rdma_vm.sh (Soft-RoCE): two processes posed as two
# hosts (bench_pingpong's PINGPONG_APART) under NCCL_SYMMEM_BACKEND=auto.
# With NCCL_NET_GDR_LEVEL=SYS NCCL would hand the plugin GPU buffers,
# which only TCP carries: the connections go over TCP and each process
# says once, as a WARN, that it passed over its RDMA device.  With NCCL
# staging in host memory (the level unset) they go over ibverbs, and
# nothing is said.
# Usage: test_rdma_hosts.sh PLUGIN BENCH_PINGPONG
. "$(dirname "$0")/tap.sh"
plugin=$1
pingpong=$2
passed='connections to other hosts run over TCP, though this host has RDMA device(s) rxe0'

run() {
	env SYMMEM_PLUGIN="$plugin" PINGPONG_APART=1 HARNESS_VERBOSE=1 NCCL_SM_FREE_VERBOSE=1 \
		NCCL_IB_HCA=rxe0 "$@" "$pingpong" 8 50 2>&1
}

out=$(run NCCL_NET_GDR_LEVEL=SYS)
check $? "posed hosts, GPU buffers allowed: the ping-pong passes"
k=$(echo "$out" | grep -c ': tcp data path')
check "$([ "$k" = 4 ]; echo $?)" "posed hosts, GPU buffers allowed: 4 connection ends on TCP ($k)"
k=$(echo "$out" | grep -c "^WARN .*$passed")
check "$([ "$k" = 2 ]; echo $?)" "posed hosts, GPU buffers allowed: one WARN per process ($k)"
[ $fail = 0 ] || echo "$out" | sed 's/^/# /'

out=$(run)
check $? "posed hosts, host staging: the ping-pong passes"
k=$(echo "$out" | grep -c ': ib data path')
check "$([ "$k" = 4 ]; echo $?)" "posed hosts, host staging: 4 connection ends on ibverbs ($k)"
k=$(echo "$out" | grep -c "^WARN ")
check "$([ "$k" = 0 ]; echo $?)" "posed hosts, host staging: no WARN ($k)"
[ $fail = 0 ] || echo "$out" | sed 's/^/# /'
exit $fail
