/*
 * A stand-in libnccl.so.2 for tests on machines without GPUs: exports the
 * NCCL calls mltrace's uprobes attach to, each returning ncclSuccess (0)
 * after $MLTRACE_FAKE_NCCL_NS nanoseconds asleep (100 us by default).
 *
 * ncclCommInitRank and ncclCommInitRankConfig write 0xc0330000 + rank as
 * the new communicator; ncclCommInitAll writes 0xa1100000 + i as comms[i].
 * The arguments are otherwise ignored. No entry point calls another
 * exported one (that would be a nested call through the PLT).
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdlib.h>
#include <time.h>

typedef int ncclResult_t;
typedef int ncclDataType_t;
typedef int ncclRedOp_t;
typedef void *ncclComm_t;
typedef void *cudaStream_t;
typedef struct {
	char internal[128];
} ncclUniqueId;
typedef struct {
	size_t size;
	unsigned magic, version;
	int blocking;
} ncclConfig_t;

#define API __attribute__((visibility("default")))

static __attribute__((noinline)) ncclResult_t wait_a_while(void)
{
	static long long ns = -1;
	if (ns < 0) {
		const char *v = getenv("MLTRACE_FAKE_NCCL_NS");
		ns = v ? atoll(v) : 100000;
	}
	if (ns > 0) {
		struct timespec t = { ns / 1000000000LL, ns % 1000000000LL };
		while (nanosleep(&t, &t))
			;
	}
	return 0;
}

API ncclResult_t ncclCommInitRank(ncclComm_t *newcomm, int nranks, ncclUniqueId id, int rank)
{
	(void)nranks;
	(void)id;
	*newcomm = (ncclComm_t)(0xc0330000UL + rank);
	return wait_a_while();
}

API ncclResult_t ncclCommInitRankConfig(ncclComm_t *newcomm, int nranks, ncclUniqueId id, int rank,
					ncclConfig_t *config)
{
	(void)nranks;
	(void)id;
	(void)config;
	*newcomm = (ncclComm_t)(0xc0330000UL + rank);
	return wait_a_while();
}

API ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
	(void)devlist;
	for (int i = 0; i < ndev; i++)
		comms[i] = (ncclComm_t)(0xa1100000UL + i);
	return wait_a_while();
}

API ncclResult_t ncclAllReduce(const void *s, void *r, size_t count, ncclDataType_t dt, ncclRedOp_t op,
			       ncclComm_t comm, cudaStream_t stream)
{
	return wait_a_while();
}

API ncclResult_t ncclAllGather(const void *s, void *r, size_t sendcount, ncclDataType_t dt, ncclComm_t comm,
			       cudaStream_t stream)
{
	return wait_a_while();
}

API ncclResult_t ncclReduceScatter(const void *s, void *r, size_t recvcount, ncclDataType_t dt, ncclRedOp_t op,
				   ncclComm_t comm, cudaStream_t stream)
{
	return wait_a_while();
}

API ncclResult_t ncclBroadcast(const void *s, void *r, size_t count, ncclDataType_t dt, int root, ncclComm_t comm,
			       cudaStream_t stream)
{
	return wait_a_while();
}

API ncclResult_t ncclReduce(const void *s, void *r, size_t count, ncclDataType_t dt, ncclRedOp_t op, int root,
			    ncclComm_t comm, cudaStream_t stream)
{
	return wait_a_while();
}

API ncclResult_t ncclSend(const void *s, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,
			  cudaStream_t stream)
{
	return wait_a_while();
}

API ncclResult_t ncclRecv(void *r, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm, cudaStream_t stream)
{
	return wait_a_while();
}

API ncclResult_t ncclGroupStart(void)
{
	return wait_a_while();
}

API ncclResult_t ncclGroupEnd(void)
{
	return wait_a_while();
}
