"""A trainer fed by loaders that decode in pure Python, measuring its own
waits for data and for the GIL.

    gil_loader.py threads|procs DIR STEPS COMPUTE_MS DECODE_MS

Two loaders read 256 KiB of DIR's 1 MiB files per batch and decode them
in pure Python (DECODE_MS of one CPU a batch), handing batches on through
a queue: `threads` are threads of the trainer's process (a `queue.Queue`:
they hold its GIL as they decode), `procs` forked processes (a
`multiprocessing` queue: their GILs are their own). The trainer computes
in pure Python too (COMPUTE_MS of one CPU a step). Both are sized by the
CPU time a round of the loop takes here, not a fixed count of rounds.

Each loader stamps a batch (CLOCK_MONOTONIC) just before it puts it, so
the trainer knows how long each `get()` waited for data: until the batch
was put (after, a loader thread held its GIL), less its run delay in it
(preempted on its way to sleep by the loader it handed the GIL to, it
waited for a CPU). Over its loop, the time it was off a CPU (wall less
its CPU time), not waiting for one (its run delay) and not for data was
spent waiting for the GIL: the loader threads take it at each switch
interval, and hold it when a batch comes.

It prints `key value` lines: `pid`; `blocked_ns` (wall time in `get()`
less its run delay there: with loader processes, its wait for data),
`data_ns` (of it, until the batch was put), `gil_ns`, `runq_ns` (its run
delay over the loop), `cpu_ns` (its CPU clock over the loop), `steal_ppm`
(the share of the CPUs' busy time the hypervisor stole over the loop:
its CPU clock leaves that out, so `gil_ns` holds it; tests/workloads/steal.py)
and `steps`.
"""
import multiprocessing
import os
import queue
import sys
import threading
import time

import steal

CHUNK = 256 << 10
FILE = 1 << 20


def make_files(d, n):
    os.makedirs(d, exist_ok=True)
    paths = []
    for i in range(n):
        p = os.path.join(d, f"shard-{i:04d}.bin")
        if not os.path.exists(p) or os.path.getsize(p) != FILE:
            with open(p, "wb") as f:
                f.write(os.urandom(FILE))
        paths.append(p)
    return paths


def churn(data, rounds):
    """Pure Python: holds the GIL throughout (but at each switch interval)."""
    acc, m = 0, len(data)
    for i in range(rounds):
        acc = (acc * 31 + data[i % m]) & 0xFFFFFFFF
    return acc


def rounds_for(ms):
    """Rounds of `churn` that take `ms` of this thread's CPU here."""
    data, n = os.urandom(4096), 200_000
    t0 = time.thread_time()
    churn(data, n)
    return max(1000, round(n * ms / ((time.thread_time() - t0) * 1000)))


def run_delay(fd):
    """The time the thread that opened `fd` (its schedstat) waited for a
    CPU (ns), by the kernel's count."""
    return int(os.pread(fd, 256, 0).split()[1])


def load(k, paths, steps, rounds, q):
    # Its first MiB read before any batch: a loader from its first put.
    with open(paths[k], "rb") as f:
        f.read()
    for step in range(k, steps, 2):
        with open(paths[step % len(paths)], "rb") as f:
            f.seek((step % 4) * CHUNK)
            data = f.read(CHUNK)
        value = churn(data, rounds)
        q.put((step, value, time.monotonic_ns()))


def main():
    mode, d, steps, compute_ms, decode_ms = sys.argv[1:6]
    steps, compute_ms, decode_ms = int(steps), float(compute_ms), float(decode_ms)
    paths = make_files(d, 8)
    compute_rounds, decode_rounds = rounds_for(compute_ms), rounds_for(decode_ms)
    own = os.urandom(4096)
    if mode == "threads":
        q = queue.Queue(maxsize=4)
        loaders = [threading.Thread(target=load, args=(k, paths, steps, decode_rounds, q)) for k in range(2)]
    else:
        ctx = multiprocessing.get_context("fork")
        q = ctx.Queue(maxsize=4)
        loaders = [ctx.Process(target=load, args=(k, paths, steps, decode_rounds, q)) for k in range(2)]
    for t in loaders:
        t.start()
    blocked = data = 0
    fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
    t_start, cpu_start, delay_start = time.monotonic_ns(), time.thread_time_ns(), run_delay(fd)
    stolen0 = steal.ticks()
    for _ in range(steps):
        r0 = run_delay(fd)
        t0 = time.monotonic_ns()
        _, _, put = q.get()
        t1 = time.monotonic_ns()
        r1 = run_delay(fd)
        blocked += t1 - t0 - (r1 - r0)
        data += max(0, min(put, t1) - t0 - (r1 - r0))
        churn(own, compute_rounds)
    wall = time.monotonic_ns() - t_start
    cpu, runq = time.thread_time_ns() - cpu_start, run_delay(fd) - delay_start
    stolen = steal.share_ppm(stolen0, steal.ticks())
    # Off a CPU, not waiting for one, and not for a batch: for the GIL.
    gil = wall - cpu - runq - data
    for t in loaders:
        t.join()
    print("pid", os.getpid())
    print("blocked_ns", blocked)
    print("data_ns", data)
    print("gil_ns", gil)
    print("runq_ns", runq)
    print("cpu_ns", cpu)
    print("steal_ppm", stolen)
    print("steps", steps)


if __name__ == "__main__":
    main()
