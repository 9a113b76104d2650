/*
 * A stand-in libnvidia-ml.so for tests on machines without GPUs: exports
 * the NVML functions mltrace calls (through nvml-wrapper) and answers with
 * scripted values for 2 devices and 3 processes.
 *
 *   FAKE_NVML_PID_FILE   file holding the pid to report as the first process
 *                        on GPU 0 (the test writes the traced command's pid)
 *   FAKE_NVML_FAIL_AFTER after this many utilisation queries, every call
 *                        fails with NVML_ERROR_GPU_IS_LOST
 *   FAKE_NVML_BUSY_FILE  GPU 0's SM utilisation is the share of the time
 *                        since the previous query that this file says was
 *                        busy ("BUSY_NS BUSY SINCE_NS", monotonic clock:
 *                        busy time so far, busy now, since when), as
 *                        NVML's own figure is over its last sample period
 *   FAKE_NVML_MIG        set: GPU 0 is in MIG mode with two MIG devices
 *                        (1g.10gb, GPU instance 1: 2 of 10 GiB used, pid 5151;
 *                        3g.40gb, instance 2: 6 of 40 GiB, pid 5252); its own
 *                        utilisation is then not supported, as on a real
 *                        MIG GPU, and GPM of instance N reads GPU 0's values
 *                        divided by 2^N
 *   FAKE_NVML_GPM_LOST_AFTER after this many GPM samples of GPU 0, GPM answers
 *                        NOT_SUPPORTED (as when MIG mode is turned on)
 *   FAKE_NVML_GPM_LIVE_FILE at nvmlShutdown, the number of GPM samples and
 *                        event sets allocated and not freed is written here
 *
 * GPU 0 ("H100") has GPM: nvmlGpmMetricsGet answers fixed values for the
 * metrics it knows between two samples of the device, in order. GPU 1
 * ("A100") has none (NVML_ERROR_NOT_SUPPORTED) and counts NVLink traffic
 * as field values: KiB since boot, growing by 1 KiB/us received and
 * 2 KiB/us sent (half on link 0) on the field's own timestamp.
 *
 * Events, scripted by each device's count of calls (one per sample):
 * GPU 0's clock event reasons are idle (0x1) at its 1st query, power cap
 * (0x4) at the 2nd and 3rd, power cap + sync boost (0x14) at the 4th,
 * none after; its volatile corrected ECC total is 0, then 2 from the 3rd
 * query, 5 from the 6th; XID 79 is waiting in its event set from its 3rd
 * sample. GPU 1 has no clock reasons or XID events (NOT_SUPPORTED); its
 * uncorrected ECC total is 0, then 1 from the 2nd query.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int nvmlReturn_t;
typedef struct { int unused; } *nvmlDevice_t;
enum { OK = 0, INVALID = 2, NOT_SUPPORTED = 3, INSUFFICIENT = 7, GPU_LOST = 15 };

typedef struct { unsigned gpu, memory; } nvmlUtilization_t;
typedef struct { unsigned version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;
typedef struct { unsigned pid; unsigned long long timeStamp; unsigned smUtil, memUtil, encUtil, decUtil; } nvmlProcessUtilizationSample_t;
typedef struct { unsigned pid; unsigned long long usedGpuMemory; unsigned gpuInstanceId, computeInstanceId; } nvmlProcessInfo_t;

#define GiB (1ULL << 30)
static const char *names[2] = {"Fake H100", "Fake A100"};
static const nvmlUtilization_t util[2] = {{87, 45}, {12, 5}};
static const unsigned long long fb_total[2] = {80 * GiB, 40 * GiB}, fb_used[2] = {12 * GiB, 3 * GiB};
static const unsigned power_mw[2] = {301500, 65000}, temp[2] = {66, 41};
static const unsigned sm_clock[2] = {1755, 1410}, mem_clock[2] = {2619, 1215};
static const unsigned pcie_rx_kb[2] = {1000, 10}, pcie_tx_kb[2] = {2000, 20};
static const unsigned enc[2] = {3, 0}, dec[2] = {4, 1};

/* Per process encoder, decoder use: GPU 0 traced pid, pid 4242; GPU 1 pid 4343. */
static const unsigned proc_enc[3] = {7, 2, 0}, proc_dec[3] = {9, 3, 1};

static int queries;
static unsigned long long tick;

static int failing(void) {
	const char *n = getenv("FAKE_NVML_FAIL_AFTER");
	return n && queries > atoi(n);
}

static unsigned traced_pid(void) {
	const char *f = getenv("FAKE_NVML_PID_FILE");
	unsigned pid = 0;
	FILE *fp = f ? fopen(f, "r") : NULL;
	if (fp) {
		if (fscanf(fp, "%u", &pid) != 1)
			pid = 0;
		fclose(fp);
	}
	return pid ? pid : 999999;
}

static int idx(nvmlDevice_t d) {
	long i = (long)d - 1;
	return i >= 0 && i < 2 ? (int)i : -1;
}

/* MIG devices (handles 101, 102): their index, or -1. */
static int mig_on(void) { return getenv("FAKE_NVML_MIG") != NULL; }
static int mig(nvmlDevice_t d) {
	long m = (long)d - 101;
	return mig_on() && m >= 0 && m < 2 ? (int)m : -1;
}

/* What a MIG device does not answer is NOT_SUPPORTED, as on real ones. */
#define DEV(d) int i = idx(d); if (i < 0) return mig(d) >= 0 ? NOT_SUPPORTED : INVALID; if (failing()) return GPU_LOST

nvmlReturn_t nvmlInit_v2(void) { return OK; }
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *n) { *n = 2; return OK; }
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t *d) {
	if (i >= 2)
		return INVALID;
	*d = (nvmlDevice_t)(long)(i + 1);
	return OK;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned len) {
	if (mig(d) >= 0) {
		snprintf(name, len, "%s", mig(d) ? "Fake H100 MIG 3g.40gb" : "Fake H100 MIG 1g.10gb");
		return OK;
	}
	DEV(d);
	snprintf(name, len, "%s", names[i]);
	return OK;
}
/* Busy ns so far by the busy file at `now` (-1 when it cannot be read). */
static long long busy_until(const char *f, long long now) {
	long long cum, since;
	int busy;
	FILE *fp = fopen(f, "r");
	int n = fp ? fscanf(fp, "%lld %d %lld", &cum, &busy, &since) : 0;
	if (fp)
		fclose(fp);
	if (n != 3)
		return -1;
	return cum + (busy && now > since ? now - since : 0);
}

static unsigned scripted_sm(const char *f) {
	static long long last_q, last_busy;
	static unsigned last_sm;
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	long long now = t.tv_sec * 1000000000LL + t.tv_nsec, b = busy_until(f, now);
	if (b < 0) {
		last_sm = 0, last_q = now, last_busy = 0;
		return 0;
	}
	if (last_q && now > last_q && b >= last_busy)
		last_sm = (unsigned)((b - last_busy) * 100 / (now - last_q));
	last_q = now, last_busy = b;
	return last_sm > 100 ? 100 : last_sm;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
	queries++;
	DEV(d);
	if (i == 0 && mig_on())
		return NOT_SUPPORTED;
	*u = util[i];
	const char *f = getenv("FAKE_NVML_BUSY_FILE");
	if (i == 0 && f)
		u->gpu = scripted_sm(f);
	return OK;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m) {
	if (mig(d) >= 0) {
		m->total = mig(d) ? 40 * GiB : 10 * GiB;
		m->used = mig(d) ? 6 * GiB : 2 * GiB;
		m->free = m->total - m->used;
		m->reserved = 0;
		return OK;
	}
	DEV(d);
	m->total = fb_total[i];
	m->used = fb_used[i];
	m->free = fb_total[i] - fb_used[i];
	m->reserved = 0;
	return OK;
}
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned *p) { DEV(d); *p = power_mw[i]; return OK; }
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned *t) { DEV(d); (void)sensor; *t = temp[i]; return OK; }
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned *c) {
	DEV(d);
	*c = type == 1 ? sm_clock[i] : type == 2 ? mem_clock[i] : 0;
	return OK;
}
nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t d, int counter, unsigned *v) {
	DEV(d);
	*v = counter == 1 ? pcie_rx_kb[i] : pcie_tx_kb[i];
	return OK;
}
nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t d, unsigned *u, unsigned *period) {
	DEV(d);
	*u = enc[i];
	*period = 100000;
	return OK;
}
nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t d, unsigned *u, unsigned *period) {
	DEV(d);
	*u = dec[i];
	*period = 100000;
	return OK;
}

/* GPU 0: the traced pid and pid 4242; GPU 1: pid 4343. */
static unsigned procs(int i, unsigned *pids, unsigned *sm, unsigned *mem, unsigned long long *fb) {
	if (i == 0) {
		pids[0] = traced_pid(), sm[0] = 61, mem[0] = 22, fb[0] = 8 * GiB;
		pids[1] = 4242, sm[1] = 26, mem[1] = 23, fb[1] = 4 * GiB;
		return 2;
	}
	pids[0] = 4343, sm[0] = 12, mem[0] = 5, fb[0] = 2 * GiB;
	return 1;
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d, nvmlProcessUtilizationSample_t *s, unsigned *count,
					     unsigned long long last_seen) {
	unsigned pids[2], sm[2], mem[2];
	unsigned long long fb[2];
	DEV(d);
	unsigned n = procs(i, pids, sm, mem, fb);
	if (getenv("FAKE_NVML_PROC_LAG")) {
		/* As the driver does: the last 8 samples of each process newer
		 * than last_seen, the first process's filed 1.5 ticks late (its
		 * newest is older than the other's). */
		enum { HISTORY = 8 };
		if (!s || *count < n * HISTORY) {
			*count = n * HISTORY;
			return INSUFFICIENT;
		}
		tick += 1000;
		unsigned m = 0;
		for (unsigned k = 0; k < n; k++)
			for (unsigned j = 0; j < HISTORY; j++) {
				unsigned long long ts = tick - j * 1000ULL - (k == 0 ? 1500 : 0);
				if (ts > last_seen && ts < tick + 1)
					s[m++] = (nvmlProcessUtilizationSample_t){pids[k], ts, sm[k], mem[k], proc_enc[2 * i + k],
										proc_dec[2 * i + k]};
			}
		*count = m;
		return OK;
	}
	if (!s || *count < n) {
		*count = n;
		return INSUFFICIENT;
	}
	tick += 1000;
	for (unsigned k = 0; k < n; k++)
		s[k] = (nvmlProcessUtilizationSample_t){pids[k], tick, sm[k], mem[k], proc_enc[2 * i + k], proc_dec[2 * i + k]};
	*count = n;
	return OK;
}

static nvmlReturn_t running(nvmlDevice_t d, unsigned *count, nvmlProcessInfo_t *infos) {
	unsigned pids[2], sm[2], mem[2];
	unsigned long long fb[2];
	if (mig(d) >= 0) {
		if (!infos || *count < 1) {
			*count = 1;
			return INSUFFICIENT;
		}
		infos[0] = (nvmlProcessInfo_t){mig(d) ? 5252 : 5151, mig(d) ? 3 * GiB : 1 * GiB, mig(d) + 1, 0};
		*count = 1;
		return OK;
	}
	DEV(d);
	unsigned n = procs(i, pids, sm, mem, fb);
	if (!infos || *count < n) {
		*count = n;
		return INSUFFICIENT;
	}
	for (unsigned k = 0; k < n; k++)
		infos[k] = (nvmlProcessInfo_t){pids[k], fb[k], 0xffffffff, 0xffffffff};
	*count = n;
	return OK;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned *c, nvmlProcessInfo_t *p) {
	return running(d, c, p);
}
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t d, unsigned *c, nvmlProcessInfo_t *p) {
	(void)p;
	if (mig(d) >= 0) {
		*c = 0;
		return OK;
	}
	DEV(d);
	*c = 0;
	return OK;
}

/* GPM: a sample is the device it was taken on and its order. */
typedef struct { int dev; unsigned long long seq; } sample_t;
typedef struct { unsigned version, isSupportedDevice; } nvmlGpmSupport_t;
typedef struct {
	unsigned metricId;
	nvmlReturn_t nvmlReturn;
	double value;
	struct { char *shortName, *longName, *unit; } metricInfo;
} nvmlGpmMetric_t;
typedef struct {
	unsigned version, numMetrics;
	sample_t *sample1, *sample2;
	nvmlGpmMetric_t metrics[210];
} nvmlGpmMetricsGet_t;

static int gpm_live;
static unsigned long long gpm_seq;

/* NVML_GPM_METRIC_* ids and GPU 0's values (percent; PCIe, NVLink MiB/s). */
static const struct { unsigned id; double value; } gpm_values[] = {
	{2, 71.5},     /* SM_UTIL */
	{3, 38.25},    /* SM_OCCUPANCY */
	{5, 54.0},     /* ANY_TENSOR_UTIL */
	{10, 62.5},    /* DRAM_BW_UTIL */
	{20, 1500.0},  /* PCIE_TX_PER_SEC */
	{21, 2500.0},  /* PCIE_RX_PER_SEC */
	{60, 12000.0}, /* NVLINK_TOTAL_RX_PER_SEC */
	{61, 11000.0}, /* NVLINK_TOTAL_TX_PER_SEC */
};

nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t d, nvmlGpmSupport_t *s) {
	DEV(d);
	if (s->version != 1)
		return INVALID;
	if (i != 0)
		return NOT_SUPPORTED;
	s->isSupportedDevice = 1;
	return OK;
}
nvmlReturn_t nvmlGpmSampleAlloc(sample_t **s) {
	*s = calloc(1, sizeof **s);
	gpm_live++;
	return *s ? OK : INVALID;
}
nvmlReturn_t nvmlGpmSampleFree(sample_t *s) {
	free(s);
	gpm_live--;
	return OK;
}
nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t d, sample_t *s) {
	static int taken;
	const char *lost = getenv("FAKE_NVML_GPM_LOST_AFTER");
	DEV(d);
	if (i != 0 || (lost && taken >= atoi(lost)))
		return NOT_SUPPORTED;
	taken++;
	s->dev = i + 1;
	s->seq = ++gpm_seq;
	return OK;
}
nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *m) {
	if (failing())
		return GPU_LOST;
	/* Two samples of one device, the older first, as NVML requires. */
	if (m->version != 1 || m->numMetrics > 210 || !m->sample1 || !m->sample2 || !m->sample1->dev ||
	    m->sample1->dev != m->sample2->dev || m->sample1->seq >= m->sample2->seq)
		return INVALID;
	/* A GPU instance's samples (dev 10 + instance) read GPU 0's / 2^N. */
	double div = m->sample1->dev >= 10 ? (double)(1 << (m->sample1->dev - 10)) : 1.0;
	/* With FAKE_NVML_GPM_NAN=N, the Nth answer's DRAM bandwidth is NaN
	 * (an H100 gave one such value, with NVML_SUCCESS). */
	static int answers;
	const char *nan_at = getenv("FAKE_NVML_GPM_NAN");
	int nan = nan_at && ++answers == atoi(nan_at);
	for (unsigned k = 0; k < m->numMetrics; k++) {
		nvmlGpmMetric_t *x = &m->metrics[k];
		x->nvmlReturn = NOT_SUPPORTED;
		for (unsigned j = 0; j < sizeof gpm_values / sizeof gpm_values[0]; j++)
			if (gpm_values[j].id == x->metricId)
				x->nvmlReturn = OK, x->value = nan && x->metricId == 10 ? 0.0 / 0.0 : gpm_values[j].value / div;
	}
	return OK;
}

/* Field values: GPU 1's NVLink data counters. */
typedef struct {
	unsigned fieldId, scopeId;
	long long timestamp, latencyUsec;
	int valueType;
	nvmlReturn_t nvmlReturn;
	union { double d; unsigned long long ull; } value;
} nvmlFieldValue_t;

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int n, nvmlFieldValue_t *v) {
	DEV(d);
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	long long us = t.tv_sec * 1000000LL + t.tv_nsec / 1000;
	for (int k = 0; k < n; k++) {
		/* 138: NVLINK_THROUGHPUT_DATA_TX, 139: _RX; scope: a link, or all. */
		unsigned per_us = v[k].fieldId == 139 ? 1 : v[k].fieldId == 138 ? 2 : 0;
		v[k].timestamp = us;
		v[k].latencyUsec = 1;
		if (i != 1 || !per_us) {
			v[k].nvmlReturn = NOT_SUPPORTED;
			continue;
		}
		v[k].nvmlReturn = OK;
		v[k].valueType = 3; /* unsigned long long */
		v[k].value.ull = (unsigned long long)us * per_us / (v[k].scopeId == 0xffffffffu ? 1 : 2);
	}
	return OK;
}

nvmlReturn_t nvmlShutdown(void) {
	const char *f = getenv("FAKE_NVML_GPM_LIVE_FILE");
	FILE *fp = f ? fopen(f, "w") : NULL;
	if (fp) {
		fprintf(fp, "%d\n", gpm_live);
		fclose(fp);
	}
	return OK;
}

/* Clock event reasons, ECC counters, XID event sets. */
static int reason_calls[2], ecc_calls[2][2];

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d, unsigned long long *r) {
	DEV(d);
	if (i != 0)
		return NOT_SUPPORTED;
	int c = ++reason_calls[0];
	*r = c == 1 ? 0x1 : c <= 3 ? 0x4 : c == 4 ? 0x14 : 0;
	return OK;
}
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int type, int counter, unsigned long long *n) {
	DEV(d);
	if (counter != 0 || type < 0 || type > 1) /* only the volatile counters */
		return INVALID;
	int c = ++ecc_calls[i][type];
	if (i == 0)
		*n = type != 0 ? 0 : c >= 6 ? 5 : c >= 3 ? 2 : 0;
	else
		*n = type != 1 ? 0 : c >= 2 ? 1 : 0;
	return OK;
}

typedef struct { int dev, delivered; } event_set_t;
typedef struct {
	nvmlDevice_t device;
	unsigned long long eventType, eventData;
	unsigned gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

nvmlReturn_t nvmlEventSetCreate(event_set_t **set) {
	*set = calloc(1, sizeof **set);
	gpm_live++;
	return *set ? OK : INVALID;
}
nvmlReturn_t nvmlEventSetFree(event_set_t *set) {
	free(set);
	gpm_live--;
	return OK;
}
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types, event_set_t *set) {
	DEV(d);
	if (i != 0)
		return NOT_SUPPORTED;
	if (types != 8) /* nvmlEventTypeXidCriticalError only */
		return INVALID;
	set->dev = i + 1;
	return OK;
}
nvmlReturn_t nvmlEventSetWait_v2(event_set_t *set, nvmlEventData_t *data, unsigned timeout_ms) {
	enum { TIMEOUT = 10 };
	(void)timeout_ms;
	if (failing())
		return GPU_LOST;
	if (set->dev != 1 || set->delivered || reason_calls[0] < 3)
		return TIMEOUT;
	set->delivered = 1;
	*data = (nvmlEventData_t){(nvmlDevice_t)(long)set->dev, 8, 79, 0xffffffff, 0xffffffff};
	return OK;
}

/* MIG: GPU 0 in MIG mode with FAKE_NVML_MIG. */
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned *current, unsigned *pending) {
	DEV(d);
	*current = *pending = i == 0 && mig_on();
	return OK;
}
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned *n) {
	DEV(d);
	*n = i == 0 && mig_on() ? 7 : 0;
	return OK;
}
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned k, nvmlDevice_t *m) {
	enum { NOT_FOUND = 6 };
	DEV(d);
	if (i != 0 || !mig_on() || k >= 7)
		return INVALID;
	if (k >= 2)
		return NOT_FOUND;
	*m = (nvmlDevice_t)(long)(101 + k);
	return OK;
}
nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t d, unsigned *id) {
	if (mig(d) < 0)
		return INVALID;
	*id = (unsigned)mig(d) + 1;
	return OK;
}
nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t d, unsigned gi, sample_t *s) {
	DEV(d);
	if (i != 0 || !mig_on() || gi < 1 || gi > 2)
		return INVALID;
	s->dev = 10 + (int)gi;
	s->seq = ++gpm_seq;
	return OK;
}
