"""What the hypervisor took from the CPUs while a workload ran.

A thread's CPU clock (`time.thread_time_ns`) leaves out the time stolen
while it held a CPU; a trace counts that time as on CPU. A workload prints
`steal_ppm`, the share of the CPUs' busy time stolen over its clock (only
a CPU that wants to run can be stolen from), so that a check can allow
for it from the same run (tests/src/steal.rs reads the same).
"""


def ticks():
    """The machine's (stolen, busy) ticks: /proc/stat's cpu line, busy
    being all but idle and iowait (steal included)."""
    with open("/proc/stat") as stat:
        f = [int(x) for x in stat.readline().split()[1:9]]
    return f[7], sum(f) - f[3] - f[4]


def share_ppm(before, after):
    """The share of the busy ticks stolen between two `ticks()`, in millionths."""
    stolen, busy = after[0] - before[0], after[1] - before[1]
    return round(1e6 * stolen / busy) if busy > 0 else 0
