/*
 * Calls the CUDA driver as a training step does, through dlopen() as
 * PyTorch loads libcuda: `cuda_trainer LIB [DELAY_MS]`. Each call takes
 * as long as it asks the stand-in (tests/workloads/fake_cuda.c) to, spinning
 * or asleep; the trainer times every call itself and prints, per call,
 * `NAME_calls N`, `NAME_ns TOTAL` and `NAME_bytes TOTAL`, and per stream
 * `stream_HANDLE_calls N` (handle in hex) with the thread that used it
 * (`stream_HANDLE_tid`).
 *
 * The main thread spins in cuStreamSynchronize on stream 0x5100 while a
 * second thread sleeps in it on 0x5200; then the other calls, one kind
 * after the other. DELAY_MS: wait that long after dlopen (the recorder
 * attaches to a library it sees mapped).
 *
 * Then, for about 2.5 s, two threads poll (cuStreamQuery, its _ptsz
 * variant, cuEventQuery) and launch (cuLaunchKernel, _ptsz, Ex,
 * cuGraphLaunch), and `NAME_counted N` says how often each was called
 * (the variants under their family's name, as the recorder counts them).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef int (*fn0)(void);
typedef int (*fn1)(void *);
typedef int (*fn3)(unsigned long long, unsigned long long, size_t);
typedef int (*fn3v1)(unsigned long long, unsigned, unsigned);
typedef int (*fn5)(unsigned long long, void *, unsigned long long, void *, size_t);
typedef void (*setfn)(long long, int);

enum { SS, CS, ES, MC, DTOH, HTOD, DTOD, PEER, C2D, C3D, NAPI };
static const char *names[NAPI] = { "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize",
				   "cuMemcpy", "cuMemcpyDtoH", "cuMemcpyHtoD", "cuMemcpyDtoD",
				   "cuMemcpyPeer", "cuMemcpy2D", "cuMemcpy3D" };
static long long calls[NAPI], ns[NAPI], bytes[NAPI];
/* The counted calls: cuStreamQuery, cuEventQuery, cuLaunchKernel, cuGraphLaunch. */
static long long counted[4];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static void *lib;
static setfn set;

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void *sym(const char *name)
{
	void *f = dlsym(lib, name);
	if (!f) {
		fprintf(stderr, "no %s in the library\n", name);
		exit(2);
	}
	return f;
}

static void count(int api, long long t0, long long n)
{
	long long d = now_ns() - t0;
	pthread_mutex_lock(&mu);
	calls[api]++;
	ns[api] += d;
	bytes[api] += n;
	pthread_mutex_unlock(&mu);
}

static void stream_syncs(const char *fn, unsigned long h, int n, long long wait, int spin)
{
	fn1 f = (fn1)sym(fn);
	set(wait, spin);
	for (int i = 0; i < n; i++) {
		long long t0 = now_ns();
		f((void *)h);
		count(SS, t0, 0);
	}
	printf("stream_%lx_calls %d\nstream_%lx_tid %ld\n", h, n, h, (long)syscall(SYS_gettid));
}

static void *worker(void *arg)
{
	(void)arg;
	stream_syncs("cuStreamSynchronize", 0x5200, 10, 3000000, 0);
	return NULL;
}

typedef int (*launchfn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
			void **, void **);

/* Polls and launches for about 2.5 s (several of the recorder's rounds). */
static void *poll_and_launch(void *arg)
{
	fn1 sq = (fn1)sym("cuStreamQuery"), sqp = (fn1)sym("cuStreamQuery_ptsz"), eq = (fn1)sym("cuEventQuery");
	launchfn lk = (launchfn)sym("cuLaunchKernel"), lkp = (launchfn)sym("cuLaunchKernel_ptsz");
	int (*lkx)(const void *, void *, void **, void **) = sym("cuLaunchKernelEx");
	int (*gl)(void *, void *) = sym("cuGraphLaunch");
	long long mine[4] = { 0 }, end = now_ns() + 2500000000LL;
	(void)arg;
	while (now_ns() < end) {
		for (int i = 0; i < 3; i++)
			sq((void *)0x5100);
		sqp((void *)0x5100);
		eq((void *)0x7700);
		eq((void *)0x7700);
		mine[0] += 4;
		mine[1] += 2;
		for (int i = 0; i < 4; i++)
			lk(NULL, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
		lkp(NULL, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
		lkx(NULL, NULL, NULL, NULL);
		gl(NULL, NULL);
		mine[2] += 6;
		mine[3] += 1;
		usleep(1000);
	}
	pthread_mutex_lock(&mu);
	for (int i = 0; i < 4; i++)
		counted[i] += mine[i];
	pthread_mutex_unlock(&mu);
	return NULL;
}

struct memcpy2d { size_t f[14]; size_t width, height; };
struct memcpy3d { size_t f[22]; size_t width, height, depth; };

int main(int argc, char **argv)
{
	char host[64];
	pthread_t t;
	long long t0;
	int i;

	if (argc < 2) {
		fprintf(stderr, "usage: cuda_trainer LIB [DELAY_MS]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 2;
	}
	if (argc > 2)
		usleep(atoi(argv[2]) * 1000);
	set = (setfn)sym("fakeCudaSet");
	((int (*)(unsigned))sym("cuInit"))(0);

	pthread_create(&t, NULL, worker, NULL);
	stream_syncs("cuStreamSynchronize", 0x5100, 10, 3000000, 1);
	pthread_join(t, NULL);
	stream_syncs("cuStreamSynchronize_ptsz", 0x5300, 4, 1000000, 0);

	set(2000000, 0);
	for (i = 0; i < 5; i++) {
		t0 = now_ns();
		((fn0)sym("cuCtxSynchronize"))();
		count(CS, t0, 0);
	}
	set(1000000, 1);
	for (i = 0; i < 6; i++) {
		void *ev = i < 5 ? (void *)0x7700 : (void *)0xbad;
		t0 = now_ns();
		int r = ((fn1)sym("cuEventSynchronize"))(ev);
		count(ES, t0, 0);
		if (i == 5)
			printf("event_bad_ret %d\n", r);
	}

	set(1000000, 0);
	for (i = 0; i < 8; i++) {
		t0 = now_ns();
		((int (*)(void *, unsigned long long, size_t))sym("cuMemcpyDtoH_v2"))(host, 0xd000, 1 << 20);
		count(DTOH, t0, 1 << 20);
	}
	t0 = now_ns();
	((int (*)(void *, unsigned, unsigned))sym("cuMemcpyDtoH"))(host, 0xd000, 65536);
	count(DTOH, t0, 65536);
	for (i = 0; i < 4; i++) {
		t0 = now_ns();
		((int (*)(unsigned long long, const void *, size_t))sym("cuMemcpyHtoD_v2"))(0xd000, host, 4096);
		count(HTOD, t0, 4096);
	}
	for (i = 0; i < 3; i++) {
		t0 = now_ns();
		((fn3)sym("cuMemcpyDtoD_v2"))(0xd000, 0xe000, 12345);
		count(DTOD, t0, 12345);
	}
	for (i = 0; i < 2; i++) {
		t0 = now_ns();
		((fn3)sym("cuMemcpy"))(0xd000, 0xe000, 777);
		count(MC, t0, 777);
	}
	for (i = 0; i < 2; i++) {
		t0 = now_ns();
		((fn5)sym("cuMemcpyPeer"))(0xd000, (void *)1, 0xe000, (void *)2, 999);
		count(PEER, t0, 999);
	}
	struct memcpy2d d2 = { .width = 256, .height = 16 };
	for (i = 0; i < 2; i++) {
		t0 = now_ns();
		((fn1)sym("cuMemcpy2D_v2"))(&d2);
		count(C2D, t0, 256 * 16);
	}
	struct memcpy3d d3 = { .width = 64, .height = 4, .depth = 2 };
	t0 = now_ns();
	((fn1)sym("cuMemcpy3D_v2"))(&d3);
	count(C3D, t0, 64 * 4 * 2);

	pthread_create(&t, NULL, poll_and_launch, NULL);
	poll_and_launch(NULL);
	pthread_join(t, NULL);
	printf("cuStreamQuery_counted %lld\ncuEventQuery_counted %lld\ncuLaunchKernel_counted %lld\n"
	       "cuGraphLaunch_counted %lld\n",
	       counted[0], counted[1], counted[2], counted[3]);

	printf("main_tid %ld\n", (long)syscall(SYS_gettid));
	for (i = 0; i < NAPI; i++)
		printf("%s_calls %lld\n%s_ns %lld\n%s_bytes %lld\n", names[i], calls[i], names[i], ns[i], names[i],
		       bytes[i]);
	return 0;
}
