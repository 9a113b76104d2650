"""A trainer's compute step, for the test workloads: `sleep` (as storage
benchmarks emulate an accelerator: its timer ends the sleep) or `spin`
(on a CPU for the whole step); and how much hashing takes a given time
on this CPU, for loaders that stand in for decoding."""
import hashlib
import os
import time


def hash_rounds(ms, size=1 << 20):
    """How many sha256 rounds over `size` bytes take `ms` on one CPU here:
    a fixed count waits for data on one machine and not on a faster one."""
    chunk = os.urandom(size)
    h = hashlib.sha256()
    n = 10
    t0 = time.perf_counter()
    for _ in range(n):
        h.update(chunk)
    each = (time.perf_counter() - t0) * 1000 / n
    return max(1, round(ms / each))


def compute(ms, how):
    if how == "sleep":
        time.sleep(ms / 1000)
        return
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass
