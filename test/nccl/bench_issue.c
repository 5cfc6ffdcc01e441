/* Enqueues one operation of the driver's matrix: the collectives as NCCL
 * calls, alltoall and sendrecv as grouped point-to-point (as nccl-tests). */
#include "bench.h"

ncclResult_t bench_issue(ncclComm_t comm, cudaStream_t stream, int op, int dtype,
			 ncclRedOp_t redop, const struct bench_shape *s, void *sbuf, void *rbuf,
			 int rank, int nranks)
{
	ncclDataType_t t = bench_dtypes[dtype].nccl;
	size_t es = bench_dtypes[dtype].size;
	char *sb = sbuf, *rb = rbuf;
	ncclResult_t rc = ncclSuccess, end;

	switch (op) {
	case OP_ALLREDUCE:
		return ncclAllReduce(sb, rb, s->send_count, t, redop, comm, stream);
	case OP_BROADCAST:
		return ncclBroadcast(sb, rb, s->send_count, t, BENCH_ROOT, comm, stream);
	case OP_REDUCE:
		return ncclReduce(sb, rb, s->send_count, t, redop, BENCH_ROOT, comm, stream);
	case OP_ALLGATHER:
		return ncclAllGather(sb, rb, s->send_count, t, comm, stream);
	case OP_REDUCESCATTER:
		return ncclReduceScatter(sb, rb, s->recv_count, t, redop, comm, stream);
	case OP_ALLTOALL:
		rc = ncclGroupStart();
		for (int p = 0; p < nranks && rc == ncclSuccess; p++) {
			rc = ncclSend(sb + (size_t)p * s->unit * es, s->unit, t, p, comm, stream);
			if (rc == ncclSuccess)
				rc = ncclRecv(rb + (size_t)p * s->unit * es, s->unit, t, p, comm, stream);
		}
		break;
	case OP_SENDRECV:
		rc = ncclGroupStart();
		if (rc == ncclSuccess)
			rc = ncclSend(sb, s->send_count, t, (rank + 1) % nranks, comm, stream);
		if (rc == ncclSuccess)
			rc = ncclRecv(rb, s->recv_count, t, (rank + nranks - 1) % nranks, comm, stream);
		break;
	default:
		return ncclInvalidArgument;
	}
	/* A group once started is always ended, even after a failed call. */
	end = ncclGroupEnd();
	return rc != ncclSuccess ? rc : end;
}

/* The op in flight has finished (1), or the communicator reports an error
 * (-1, *err set), or neither yet (0). */
int bench_poll_op(ncclComm_t comm, cudaStream_t stream, ncclResult_t *err)
{
	cudaError_t q = cudaStreamQuery(stream);

	if (ncclCommGetAsyncError(comm, err) != ncclSuccess)
		*err = ncclInternalError;
	if (*err != ncclSuccess && *err != ncclInProgress)
		return -1;
	if (q == cudaSuccess)
		return 1;
	if (q != cudaErrorNotReady) {
		*err = ncclUnhandledCudaError;
		return -1;
	}
	return 0;
}
