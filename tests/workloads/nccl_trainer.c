/*
 * Calls NCCL as a data-parallel training step does, through dlopen() as
 * PyTorch loads libnccl: `nccl_trainer LIB [DELAY_MS]`, against the stand-in
 * (tests/workloads/fake_nccl.c). Rank 2 of 4 (ncclCommInitRank), then:
 *   ncclAllReduce      5 x 1 Mi float32 (7),  stream 0x5100
 *   ncclAllGather      3 x 1000 bfloat16 (9), stream 0x5200
 *   ncclReduceScatter  2 x 4096 float16 (6),  stream 0x5300
 *   ncclBroadcast      2 x 256 int8 (0), root 1, stream 0x5400
 *   ncclReduce         4 x 100 float64 (8), root 3, stream 0x5500
 *   3 x { ncclGroupStart; ncclSend 10 int32 (2) to 3; ncclRecv 10 int32
 *         from 1 (stream 0x5600); ncclGroupEnd }
 * and on other communicators: one ncclAllReduce of 16 int64 (4) on
 * ncclCommInitAll's second (rank 1 of 2, stream 0x5700), one of 8 uint8 (1)
 * on ncclCommInitRankConfig's (rank 0 of 8, stream 0x5800) and one of 1
 * float32 on a communicator never created (0xdead, stream 0x5900).
 * Prints the handles (`comm`, `all1`, `cfg`, in decimal), `tid N` and
 * `failed N` (calls not answering 0).
 * DELAY_MS: wait that long after dlopen (a library mapped later).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct {
	char internal[128];
} ncclUniqueId;
typedef struct {
	size_t size;
	unsigned magic, version;
	int blocking;
} ncclConfig_t;
typedef void *comm_t;

typedef int (*init_rank_fn)(comm_t *, int, ncclUniqueId, int);
typedef int (*init_config_fn)(comm_t *, int, ncclUniqueId, int, ncclConfig_t *);
typedef int (*init_all_fn)(comm_t *, int, const int *);
typedef int (*all_reduce_fn)(const void *, void *, size_t, int, int, comm_t, void *);
typedef int (*all_gather_fn)(const void *, void *, size_t, int, comm_t, void *);
typedef int (*reduce_scatter_fn)(const void *, void *, size_t, int, int, comm_t, void *);
typedef int (*broadcast_fn)(const void *, void *, size_t, int, int, comm_t, void *);
typedef int (*reduce_fn)(const void *, void *, size_t, int, int, int, comm_t, void *);
typedef int (*p2p_fn)(void *, size_t, int, int, comm_t, void *);
typedef int (*group_fn)(void);

static void *lib;
static int failed;

static void *sym(const char *name)
{
	void *f = dlsym(lib, name);
	if (!f) {
		fprintf(stderr, "no %s in the library\n", name);
		exit(2);
	}
	return f;
}

#define CALL(x) (failed += (x) != 0)
#define S(h) ((void *)(h))

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: nccl_trainer LIB [DELAY_MS]\n");
		return 2;
	}
	lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 2;
	}
	if (argc > 2)
		usleep(atoi(argv[2]) * 1000);

	init_rank_fn init_rank = (init_rank_fn)sym("ncclCommInitRank");
	init_config_fn init_config = (init_config_fn)sym("ncclCommInitRankConfig");
	init_all_fn init_all = (init_all_fn)sym("ncclCommInitAll");
	all_reduce_fn all_reduce = (all_reduce_fn)sym("ncclAllReduce");
	all_gather_fn all_gather = (all_gather_fn)sym("ncclAllGather");
	reduce_scatter_fn reduce_scatter = (reduce_scatter_fn)sym("ncclReduceScatter");
	broadcast_fn broadcast = (broadcast_fn)sym("ncclBroadcast");
	reduce_fn reduce = (reduce_fn)sym("ncclReduce");
	p2p_fn send = (p2p_fn)sym("ncclSend");
	p2p_fn recv = (p2p_fn)sym("ncclRecv");
	group_fn group_start = (group_fn)sym("ncclGroupStart");
	group_fn group_end = (group_fn)sym("ncclGroupEnd");

	ncclUniqueId id;
	memset(&id, 0x5a, sizeof(id));
	comm_t comm = 0, all[2] = { 0, 0 }, cfg = 0;
	ncclConfig_t config = { sizeof(config), 0xcafebeef, 0, 1 };
	CALL(init_rank(&comm, 4, id, 2));
	CALL(init_all(all, 2, NULL));
	CALL(init_config(&cfg, 8, id, 0, &config));
	char buf[64];

	for (int i = 0; i < 5; i++)
		CALL(all_reduce(buf, buf, 1 << 20, 7, 0, comm, S(0x5100)));
	for (int i = 0; i < 3; i++)
		CALL(all_gather(buf, buf, 1000, 9, comm, S(0x5200)));
	for (int i = 0; i < 2; i++)
		CALL(reduce_scatter(buf, buf, 4096, 6, 0, comm, S(0x5300)));
	for (int i = 0; i < 2; i++)
		CALL(broadcast(buf, buf, 256, 0, 1, comm, S(0x5400)));
	for (int i = 0; i < 4; i++)
		CALL(reduce(buf, buf, 100, 8, 0, 3, comm, S(0x5500)));
	for (int i = 0; i < 3; i++) {
		CALL(group_start());
		CALL(send(buf, 10, 2, 3, comm, S(0x5600)));
		CALL(recv(buf, 10, 2, 1, comm, S(0x5600)));
		CALL(group_end());
	}
	CALL(all_reduce(buf, buf, 16, 4, 0, all[1], S(0x5700)));
	CALL(all_reduce(buf, buf, 8, 1, 0, cfg, S(0x5800)));
	CALL(all_reduce(buf, buf, 1, 7, 0, (comm_t)0xdead, S(0x5900)));

	printf("comm %lu\nall1 %lu\ncfg %lu\ntid %ld\nfailed %d\n", (unsigned long)comm, (unsigned long)all[1],
	       (unsigned long)cfg, (long)syscall(SYS_gettid), failed);
	return 0;
}
