// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The benchmark's floor: programs on the same raw tracepoints as mltrace's
 * syscall capture that only count. What any BPF tracer pays before doing
 * any work; mltrace's cost is compared with this.
 */
#include "kernel.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, u32);
	__type(value, u64);
} counts SEC(".maps");

static __always_inline void bump(u32 k)
{
	u64 *c = bpf_map_lookup_elem(&counts, &k);

	if (c)
		*c += 1;
}

SEC("raw_tp/sys_enter")
int floor_enter(void *ctx)
{
	bump(0);
	return 0;
}

SEC("raw_tp/sys_exit")
int floor_exit(void *ctx)
{
	bump(1);
	return 0;
}
