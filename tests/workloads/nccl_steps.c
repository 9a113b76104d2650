/*
 * Ranks of a data-parallel job on the stand-in CUDA and NCCL libraries
 * (fake_cuda.c, fake_nccl.c), one of them slow to compute:
 *
 *   nccl_steps CUDA_LIB NCCL_LIB RANKS STEPS COMPUTE_MS SLOW_RANK SLOW_MS
 *
 * The launcher puts a process-shared barrier in a file under /dev/shm and
 * execs RANKS copies of itself, each with RANK set. Each rank, per step:
 * spins COMPUTE_MS (SLOW_MS on SLOW_RANK), ncclAllReduce on stream 0x5100,
 * cuStreamSynchronize(0x5100) (the stand-in waits at the barrier there,
 * as a sync on a collective waits for every rank, then
 * $MLTRACE_FAKE_SYNC_NS), then cuStreamSynchronize(0x5200), with no
 * collective on it (a wait for the GPU alone). Each rank prints `pid_R`,
 * `coll_ns_R` (its time in the first sync) and `gpu_ns_R` (the second).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
	char internal[128];
} ncclUniqueId;
typedef int (*init_rank_fn)(void **, int, ncclUniqueId, int);
typedef int (*all_reduce_fn)(const void *, void *, size_t, int, int, void *, void *);
typedef int (*sync_fn)(void *);
typedef void (*barrier_fn)(pthread_barrier_t *, void *);

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void *sym(void *lib, const char *name)
{
	void *f = dlsym(lib, name);
	if (!f) {
		fprintf(stderr, "no %s\n", name);
		exit(2);
	}
	return f;
}

static pthread_barrier_t *shared_barrier(const char *path, int create, int ranks)
{
	int fd = open(path, O_RDWR | (create ? O_CREAT | O_TRUNC : 0), 0600);
	if (fd < 0 || (create && ftruncate(fd, sizeof(pthread_barrier_t)))) {
		perror(path);
		exit(2);
	}
	pthread_barrier_t *b = mmap(0, sizeof *b, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (create) {
		pthread_barrierattr_t a;
		pthread_barrierattr_init(&a);
		pthread_barrierattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
		pthread_barrier_init(b, &a, ranks);
	}
	return b;
}

int main(int argc, char **argv)
{
	if (argc < 8) {
		fprintf(stderr, "usage: nccl_steps CUDA_LIB NCCL_LIB RANKS STEPS COMPUTE_MS SLOW_RANK SLOW_MS\n");
		return 2;
	}
	int ranks = atoi(argv[3]), steps = atoi(argv[4]), slow = atoi(argv[6]);
	char path[64];
	const char *rank_env = getenv("RANK");
	if (!rank_env) {
		snprintf(path, sizeof path, "/dev/shm/mltrace-nccl-steps-%d", getpid());
		shared_barrier(path, 1, ranks);
		setenv("NCCL_STEPS_BARRIER", path, 1);
		for (int r = 0; r < ranks; r++) {
			if (fork() == 0) {
				char v[16];
				snprintf(v, sizeof v, "%d", r);
				setenv("RANK", v, 1);
				execv("/proc/self/exe", argv);
				_exit(127);
			}
		}
		int bad = 0, st;
		while (wait(&st) > 0)
			bad |= !WIFEXITED(st) || WEXITSTATUS(st);
		unlink(path);
		return bad;
	}
	int rank = atoi(rank_env);
	pthread_barrier_t *b = shared_barrier(getenv("NCCL_STEPS_BARRIER"), 0, ranks);
	void *cuda = dlopen(argv[1], RTLD_NOW), *nccl = dlopen(argv[2], RTLD_NOW);
	if (!cuda || !nccl) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 2;
	}
	init_rank_fn init = (init_rank_fn)sym(nccl, "ncclCommInitRank");
	all_reduce_fn all_reduce = (all_reduce_fn)sym(nccl, "ncclAllReduce");
	sync_fn sync = (sync_fn)sym(cuda, "cuStreamSynchronize");
	((barrier_fn)sym(cuda, "fakeCudaBarrier"))(b, (void *)0x5100);
	void *comm;
	ncclUniqueId id = { { 0 } };
	init(&comm, ranks, id, rank);
	long long compute = (long long)(atof(rank == slow ? argv[7] : argv[5]) * 1e6), coll = 0, gpu = 0;
	for (int i = 0; i < steps; i++) {
		long long end = now_ns() + compute;
		while (now_ns() < end)
			;
		all_reduce((void *)0x1000, (void *)0x2000, 1 << 20, 7, 0, comm, (void *)0x5100);
		long long t = now_ns();
		sync((void *)0x5100);
		long long u = now_ns();
		sync((void *)0x5200);
		coll += u - t;
		gpu += now_ns() - u;
	}
	printf("pid_%d %d\ncoll_ns_%d %lld\ngpu_ns_%d %lld\n", rank, getpid(), rank, coll, rank, gpu);
	return 0;
}
