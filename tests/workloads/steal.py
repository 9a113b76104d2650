"""What the hypervisor took from the CPUs while a workload ran.

A thread's CPU clock (`time.thread_time_ns`) leaves out the time stolen
while it held a CPU; a trace counts that time as on CPU. A workload prints
`steal_ppm`, the most of one CPU's time stolen over its clock, so that a
check can allow for it from the same run.
"""


def ticks():
    """Each CPU's (steal, all) ticks: /proc/stat's cpuN lines."""
    out = []
    for line in open("/proc/stat"):
        if line.startswith("cpu") and line[3].isdigit():
            f = [int(x) for x in line.split()[1:9]]
            out.append((f[7], sum(f)))
    return out


def most_ppm(before, after):
    """The most of one CPU's time stolen between two `ticks()`, in millionths."""
    shares = [(s1 - s0) / (a1 - a0) for (s0, a0), (s1, a1) in zip(before, after) if a1 > a0]
    return round(1e6 * max(shares, default=0.0))
