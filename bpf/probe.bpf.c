// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Programs that do nothing, loaded by `mltrace doctor` one at a time to
 * learn for real whether this kernel accepts fentry, kprobe and uprobe
 * programs (a version number cannot say: they depend on the kernel's
 * configuration and on the machine's security settings).
 */
#include "kernel.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("fentry/vfs_read")
int BPF_PROG(probe_fentry)
{
	return 0;
}

SEC("kprobe/vfs_read")
int BPF_KPROBE(probe_kprobe)
{
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(probe_uprobe)
{
	return 0;
}
