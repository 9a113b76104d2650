"""A trainer fed by one forked worker that reads random 4 KiB samples of
a big file (a dataset read by random access), for comparing a run from
a cold page cache with one from a warm one.

    sample_loader.py make FILE MIB        write FILE (random bytes), sync it
    sample_loader.py drop FILE            drop FILE's pages from the page cache
    sample_loader.py warm FILE            read FILE whole: its pages in the cache
    sample_loader.py calibrate FILE BATCHES
                                          time random reads of FILE from storage
                                          (its pages dropped first, and after)
                                          and print `samples` (per batch) and
                                          `compute_ms` for a job of BATCHES
    sample_loader.py run FILE EPOCHS STEPS SAMPLES COMPUTE_MS [spin|sleep]

`calibrate` sizes the job by this machine's storage, not by fixed work:
a batch of `samples` reads takes about 30 ms from storage here, and the
trainer computes a third of that per step, so that from a cold cache it
waits for data and from a warm one it does not, on a slow disk or a
fast one. The samples of every batch are distinct pages of FILE (at most
half of them in all), so a cold run reads each from storage.

`run`: EPOCHS epochs (`mltrace_ebpf.phase("epoch")`, when the module is on
PYTHONPATH) of STEPS steps; the worker reads each batch's SAMPLES pages
with pread (POSIX_FADV_RANDOM: no readahead) and puts it on a queue; the
trainer marks each step (`mltrace_ebpf.mark("step")`), takes the next
batch (its wait, timed) and computes COMPUTE_MS, spinning (the default)
or sleeping (as storage benchmarks emulate an accelerator). It prints `key
value` lines: `pid`, `steps`, `total_ns` (its first request to its last
step's end), `blocked_ns` (its time waiting for batches), `cpu_ns` (its
main thread's CPU clock at the end: the interpreter's start-up included)
and `steal_ppm` (the share of the CPUs' busy time the hypervisor stole
over its clock: tests/workloads/steal.py).
"""
import multiprocessing as mp
import os
import random
import sys
import time

from compute import compute
import steal

PAGE = 4096
BATCH_MS = 30
# Samples of a batch at most: the pages of the file must outnumber twice
# those of the whole job (a fast disk would want more).
CALIBRATION_READS = 400

try:
    import mltrace_ebpf
except ImportError:
    mltrace_ebpf = None


def drop(path):
    fd = os.open(path, os.O_RDONLY)
    os.fdatasync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


def pages(path):
    return os.path.getsize(path) // PAGE


def batch_pages(path, batches, samples):
    """Every batch's pages: distinct pages of the file, the same in every run."""
    chosen = random.Random(42).sample(range(pages(path)), batches * samples)
    return [chosen[i * samples : (i + 1) * samples] for i in range(batches)]


def worker(path, batches, q):
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
    for b in batches:
        n = 0
        for p in b:
            n += len(os.pread(fd, PAGE, p * PAGE))
        q.put(n)
    os.close(fd)


def run(path, epochs, steps, samples, compute_ms, how):
    batches = batch_pages(path, epochs * steps, samples)
    ctx = mp.get_context("fork")
    q = ctx.Queue(maxsize=2)
    ticks0 = steal.ticks()
    start = time.perf_counter_ns()
    w = ctx.Process(target=worker, args=(path, batches, q))
    w.start()
    blocked = 0
    for e in range(1, epochs + 1):
        ph = mltrace_ebpf.phase("epoch", epoch_num=e) if mltrace_ebpf else None
        if ph:
            ph.__enter__()
        for _ in range(steps):
            if mltrace_ebpf:
                mltrace_ebpf.mark("step")
            t = time.perf_counter_ns()
            q.get()
            blocked += time.perf_counter_ns() - t
            compute(compute_ms, how)
        if ph:
            ph.__exit__(None, None, None)
    total = time.perf_counter_ns() - start
    cpu, stolen = time.thread_time_ns(), steal.share_ppm(ticks0, steal.ticks())
    w.join()
    print(f"pid {os.getpid()}")
    print(f"steps {epochs * steps}")
    print(f"total_ns {total}")
    print(f"blocked_ns {blocked}")
    print(f"cpu_ns {cpu}")
    print(f"steal_ppm {stolen}")


def calibrate(path, batches):
    """Samples per batch for BATCH_MS from storage, and the compute per step."""
    drop(path)
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
    probe = random.Random(7).sample(range(pages(path)), CALIBRATION_READS)
    t = time.perf_counter()
    for p in probe:
        os.pread(fd, PAGE, p * PAGE)
    each_ms = (time.perf_counter() - t) * 1000 / len(probe)
    os.close(fd)
    drop(path)
    most = pages(path) // (2 * batches)
    samples = max(1, min(most, round(BATCH_MS / each_ms)))
    print(f"read_us {each_ms * 1000:.1f}")
    print(f"samples {samples}")
    print(f"compute_ms {samples * each_ms / 3:.2f}")


def main():
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "make":
        mib = int(sys.argv[3])
        with open(path, "wb") as f:
            for _ in range(mib):
                f.write(os.urandom(1 << 20))
        drop(path)
    elif mode == "drop":
        drop(path)
    elif mode == "warm":
        with open(path, "rb") as f:
            while f.read(1 << 20):
                pass
    elif mode == "calibrate":
        calibrate(path, int(sys.argv[3]))
    elif mode == "run":
        epochs, steps, samples = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
        how = sys.argv[7] if len(sys.argv) > 7 else "spin"
        run(path, epochs, steps, samples, float(sys.argv[6]), how)
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
