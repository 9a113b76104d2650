/*
 * A stand-in libcuda.so.1 for tests on machines without GPUs: exports the
 * CUDA driver calls mltrace's uprobes attach to, each taking as long as the
 * calling thread asks and returning CUDA_SUCCESS (0).
 *
 * How long a call takes, per thread: fakeCudaSet(ns, spin) (exported; the
 * trainer calls it through dlsym), else $MLTRACE_FAKE_SYNC_NS and
 * $MLTRACE_FAKE_SYNC_MODE (spin or sleep; sleep by default).
 * cuEventSynchronize on the event 0xbad answers CUDA_ERROR_NOT_READY (600).
 * fakeCudaBarrier(barrier, stream): cuStreamSynchronize on that stream
 * first waits at the (process-shared) barrier, as a sync on an NCCL
 * collective's stream waits until every rank has joined it.
 *
 * Each entry point waits through the same static helper: none calls another
 * exported one (that would be a nested call through the PLT). The queries
 * and launches return through one too (their first instruction a jump,
 * which a uprobe emulates), but for cuEventQuery, whose first instruction
 * the kernel has to single-step: `make bench` shows both costs.
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUstream;
typedef void *CUevent;
typedef void *CUcontext;

static __thread long long wait_ns = -1;
static __thread int wait_spin;

__attribute__((visibility("default"))) void fakeCudaSet(long long ns, int spin)
{
	wait_ns = ns;
	wait_spin = spin;
}

static pthread_barrier_t *barrier;
static CUstream barrier_stream;

__attribute__((visibility("default"))) void fakeCudaBarrier(pthread_barrier_t *b, CUstream s)
{
	barrier = b;
	barrier_stream = s;
}

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static __attribute__((noinline)) CUresult wait_a_while(void)
{
	if (wait_ns < 0) {
		const char *ns = getenv("MLTRACE_FAKE_SYNC_NS");
		const char *mode = getenv("MLTRACE_FAKE_SYNC_MODE");
		wait_ns = ns ? atoll(ns) : 0;
		wait_spin = mode && strcmp(mode, "spin") == 0;
	}
	if (wait_ns <= 0)
		return 0;
	if (wait_spin) {
		long long end = now_ns() + wait_ns;
		while (now_ns() < end)
			;
	} else {
		struct timespec t = { wait_ns / 1000000000LL, wait_ns % 1000000000LL };
		while (nanosleep(&t, &t))
			;
	}
	return 0;
}

CUresult cuInit(unsigned flags) { (void)flags; return 0; }
CUresult cuStreamSynchronize(CUstream s)
{
	if (barrier && s == barrier_stream)
		pthread_barrier_wait(barrier);
	return wait_a_while();
}
CUresult cuStreamSynchronize_ptsz(CUstream s) { (void)s; return wait_a_while(); }
CUresult cuCtxSynchronize(void) { return wait_a_while(); }
CUresult cuEventSynchronize(CUevent e)
{
	CUresult r = wait_a_while();
	return e == (CUevent)0xbad ? 600 : r;
}
static __attribute__((noinline)) CUresult done(void)
{
	__asm__ volatile("");
	return 0;
}

CUresult cuStreamQuery(CUstream s) { (void)s; return done(); }
CUresult cuStreamQuery_ptsz(CUstream s) { (void)s; return done(); }
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
			unsigned shared, CUstream s, void **params, void **extra)
{
	(void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shared; (void)s; (void)params;
	(void)extra;
	return done();
}
CUresult cuLaunchKernel_ptsz(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
			     unsigned shared, CUstream s, void **params, void **extra)
{
	(void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shared; (void)s; (void)params;
	(void)extra;
	return done();
}
CUresult cuLaunchKernelEx(const void *config, void *f, void **params, void **extra)
{
	(void)config; (void)f; (void)params; (void)extra;
	return done();
}
CUresult cuGraphLaunch(void *exec, CUstream s) { (void)exec; (void)s; return done(); }
CUresult cuEventQuery(CUevent e) { (void)e; return 0; }
CUresult cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n) { (void)d; (void)s; (void)n; return wait_a_while(); }
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { (void)d; (void)s; (void)n; return wait_a_while(); }
CUresult cuMemcpyDtoH(void *d, unsigned s, unsigned n) { (void)d; (void)s; (void)n; return wait_a_while(); }
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { (void)d; (void)s; (void)n; return wait_a_while(); }
CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { (void)d; (void)s; (void)n; return wait_a_while(); }
CUresult cuMemcpyPeer(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n)
{
	(void)d; (void)dc; (void)s; (void)sc; (void)n;
	return wait_a_while();
}
CUresult cuMemcpy2D_v2(const void *desc) { (void)desc; return wait_a_while(); }
CUresult cuMemcpy3D_v2(const void *desc) { (void)desc; return wait_a_while(); }
