"""A trainer fed by forked workers through a bounded queue, as a PyTorch
DataLoader is, whose loaders can be made to wait on each thing the
suggestions after the verdict name: the CPU (decoding), a slow source
(sleeping), storage (cold random reads), one slow file among many, and
opens of many small files. Every figure a suggestion prints is measured
here too, on the workload's own clock.

    suggest_loader.py [options]

  --workers N        forked workers (1)
  --steps N          batches in all (each worker makes every N-th)
  --queue N          batches the queue holds: the prefetch depth (2)
  --compute MS       the trainer's compute per step (5)
  --burst EVERY:MS   every EVERY-th step, the first one first, computes MS
                     instead (a bursty trainer)
  --how sleep|spin   how it computes (sleep)
  --whole LIST       a file naming files (one a line), each read whole:
  --per-batch N      N of them per batch, in turn (1)
  --probe K          before each of those, K names that do not exist are
                     opened (and fail): a loader looking for its sample
  --pages FILES      comma-separated files, FADV_RANDOM; --samples K random
  --samples K        4 KiB pages of them per batch, distinct over the run
  --hash-ms MS       hash 1 MiB over and over for about MS of one CPU a batch
  --sleep-ms MS      sleep MS a batch (a slow remote source)
  --disk PATH        measure the busy share of the disk PATH is on
  --marks            mark each step (mltrace_ebpf.mark("step"))

It prints `key value` lines. The trainer: `pid`, `steps`, `total_ns` (its
first request to its last step's end), `blocked_ns` (waiting for
batches), `cpus`, `idle_ppm` (the machine's idle and iowait share over
its clock, /proc/stat, in millionths), `steal_ppm` (the share of the
CPUs' busy time the hypervisor stole over its clock: tests/workloads/steal.py),
`disk_busy_ppm` (the disk's
share of that time with requests in flight, /proc/diskstats). Each
worker K: `wK_pid`, `wK_wall_ns` (its start to its last batch put),
`wK_cpu_ns` (its main thread's CPU time), `wK_read_ns` (in reads),
`wK_meta_ns` (in opens and closes), `wK_opens`, `wK_sleep_ns`,
`wK_put_ns` (blocked putting a batch on a full queue), `wK_read_bytes`,
and `wK_dir_read_ns:DIR` (its time in reads of the files of each
directory) and `wK_file_read_ns:PATH` (of each of --pages).
"""
import argparse
import hashlib
import multiprocessing as mp
import os
import random
import time

from compute import compute, hash_rounds
import steal

PAGE = 4096
MIB = 1 << 20


def args():
    p = argparse.ArgumentParser()
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--queue", type=int, default=2)
    p.add_argument("--compute", type=float, default=5)
    p.add_argument("--burst", default=None)
    p.add_argument("--how", default="sleep")
    p.add_argument("--whole", default=None)
    p.add_argument("--per-batch", type=int, default=1)
    p.add_argument("--probe", type=int, default=0)
    p.add_argument("--pages", default=None)
    p.add_argument("--samples", type=int, default=0)
    p.add_argument("--hash-ms", type=float, default=0)
    p.add_argument("--sleep-ms", type=float, default=0)
    p.add_argument("--disk", default=None)
    p.add_argument("--marks", action="store_true")
    return p.parse_args()


def batches(a):
    """Each batch's work: (files read whole, (file, page) pairs)."""
    whole = open(a.whole).read().split() if a.whole else []
    pages = a.pages.split(",") if a.pages else []
    sizes = [os.path.getsize(f) // PAGE for f in pages]
    every = [(f, p) for f, n in zip(pages, sizes) for p in range(n)]
    chosen = random.Random(42).sample(every, a.steps * a.samples) if pages else []
    out = []
    for i in range(a.steps):
        w = [whole[(i * a.per_batch + j) % len(whole)] for j in range(a.per_batch)] if whole else []
        out.append((w, chosen[i * a.samples : (i + 1) * a.samples]))
    return out


def worker(k, a, work, q, rounds):
    start = time.perf_counter_ns()
    t = dict(read=0, meta=0, opens=0, sleep=0, put=0, bytes=0)
    by_dir, by_file = {}, {}
    fds = {}
    buf = os.urandom(MIB) if rounds else b""
    last = start

    def timed_read(fd, n, off, path):
        a0 = time.perf_counter_ns()
        b = os.pread(fd, n, off) if off is not None else os.read(fd, n)
        ns = time.perf_counter_ns() - a0
        t["read"] += ns
        d = os.path.dirname(path)
        by_dir[d] = by_dir.get(d, 0) + ns
        return b, ns

    for i in range(k, a.steps, a.workers):
        files, pages = work[i]
        n = 0
        for path in files:
            base = path + ".missing"
            for j in range(a.probe):
                a0 = time.perf_counter_ns()
                try:
                    os.open(f"{base}{j}", os.O_RDONLY)
                except FileNotFoundError:
                    pass
                t["meta"] += time.perf_counter_ns() - a0
                t["opens"] += 1
            a0 = time.perf_counter_ns()
            fd = os.open(path, os.O_RDONLY)
            t["meta"] += time.perf_counter_ns() - a0
            t["opens"] += 1
            while True:
                b, _ = timed_read(fd, MIB, None, path)
                n += len(b)
                if len(b) < MIB:
                    break
            a0 = time.perf_counter_ns()
            os.close(fd)
            t["meta"] += time.perf_counter_ns() - a0
        for path, p in pages:
            fd = fds.get(path)
            if fd is None:
                fd = fds[path] = os.open(path, os.O_RDONLY)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            b, ns = timed_read(fd, PAGE, p * PAGE, path)
            by_file[path] = by_file.get(path, 0) + ns
            n += len(b)
        t["bytes"] += n
        if rounds:
            h = hashlib.sha256()
            for _ in range(rounds):
                h.update(buf)
        if a.sleep_ms:
            a0 = time.perf_counter_ns()
            time.sleep(a.sleep_ms / 1000)
            t["sleep"] += time.perf_counter_ns() - a0
        a0 = time.perf_counter_ns()
        q.put((i, n))
        last = time.perf_counter_ns()
        t["put"] += last - a0
    cpu = time.thread_time_ns()
    lines = [
        f"w{k}_pid {os.getpid()}",
        f"w{k}_wall_ns {last - start}",
        f"w{k}_cpu_ns {cpu}",
        f"w{k}_read_ns {t['read']}",
        f"w{k}_meta_ns {t['meta']}",
        f"w{k}_opens {t['opens']}",
        f"w{k}_sleep_ns {t['sleep']}",
        f"w{k}_put_ns {t['put']}",
        f"w{k}_read_bytes {t['bytes']}",
    ]
    lines += [f"w{k}_dir_read_ns:{d} {ns}" for d, ns in by_dir.items()]
    lines += [f"w{k}_file_read_ns:{f} {ns}" for f, ns in by_file.items()]
    # One write: the lines of the workers and the trainer do not interleave.
    os.write(1, ("\n".join(lines) + "\n").encode())


def cpu_ticks():
    f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return f[3] + f[4], sum(f[:8])


def disk_of(path):
    """The whole disk `path` is on, by its name in /proc/diskstats."""
    st = os.stat(path).st_dev
    sys_dev = f"/sys/dev/block/{os.major(st)}:{os.minor(st)}"
    real = os.path.realpath(sys_dev)
    if os.path.exists(os.path.join(real, "partition")):
        real = os.path.dirname(real)
    return os.path.basename(real)


def io_ticks(disk):
    for line in open("/proc/diskstats"):
        f = line.split()
        if f[2] == disk:
            return int(f[12])
    return 0


def main():
    a = args()
    work = batches(a)
    rounds = hash_rounds(a.hash_ms) if a.hash_ms else 0
    every, burst_ms = (int(x) for x in a.burst.split(":")) if a.burst else (0, 0)
    disk = disk_of(a.disk) if a.disk else None
    mark = None
    if a.marks:
        import mltrace_ebpf

        mark = mltrace_ebpf.mark
    ctx = mp.get_context("fork")
    q = ctx.Queue(maxsize=a.queue)
    procs = [ctx.Process(target=worker, args=(k, a, work, q, rounds)) for k in range(a.workers)]
    idle0, all0 = cpu_ticks()
    stolen0 = steal.ticks()
    busy0 = io_ticks(disk) if disk else 0
    start = time.perf_counter_ns()
    for p in procs:
        p.start()
    blocked = 0
    for i in range(a.steps):
        if mark:
            mark("step")
        t = time.perf_counter_ns()
        q.get()
        blocked += time.perf_counter_ns() - t
        ms = burst_ms if every and i % every == 0 else a.compute
        compute(ms, a.how)
    total = time.perf_counter_ns() - start
    idle1, all1 = cpu_ticks()
    stolen1 = steal.ticks()
    busy1 = io_ticks(disk) if disk else 0
    for p in procs:
        p.join()
    print(f"pid {os.getpid()}")
    print(f"steps {a.steps}")
    print(f"total_ns {total}")
    print(f"blocked_ns {blocked}")
    print(f"cpus {os.cpu_count()}")
    print(f"idle_ppm {round(1e6 * (idle1 - idle0) / max(1, all1 - all0))}")
    print(f"steal_ppm {steal.share_ppm(stolen0, stolen1)}")
    if disk:
        print(f"disk_busy_ppm {round(1e6 * (busy1 - busy0) / (total / 1e6))}")


if __name__ == "__main__":
    main()
