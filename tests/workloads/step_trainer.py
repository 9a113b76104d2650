"""A trainer that takes batches from 4 forked workers, as a PyTorch
DataLoader does, and measures its own waits for them.

    step_trainer.py DATA STEPS COMPUTE_MS sleep|spin

Each worker, per batch: reads a 1 MiB chunk of DATA and hashes it (over
and over, standing in for decoding), then puts a small batch on the
queue. Four of them keep both CPUs of a small machine busy. The trainer,
per step: takes the next batch (its wait, measured) and computes for
COMPUTE_MS, by sleeping (as storage benchmarks emulate an accelerator:
its timer ends the sleep while a worker runs on that CPU) or by spinning.
It prints `key value` lines: `pid`, `total_ns` (its first request to its last batch) and
`blocked_ns` (time in the queue's get; `blocked_queued_ns`: queued for a
CPU in it, with STEP_TRAINER_QUEUED=1), `rounds` (hash rounds per batch),
the workers' pids, and `waitN`, its wait for each step's batch (ns).

STEP_TRAINER_WORKERS sets how many workers (4 when unset);
STEP_TRAINER_MARKS=1 marks each step (`mltrace_ebpf.mark("step")`, the
module on PYTHONPATH) as a job that logs its steps does.
"""
import hashlib
import multiprocessing as mp
import os
import sys
import time

from compute import compute, hash_rounds

WORKERS = int(os.environ.get("STEP_TRAINER_WORKERS", "4"))
CHUNK = 1 << 20
# Hash rounds per batch: measured when unset, for about 30 ms of one CPU
# a batch on a 2-CPU machine and as much longer as more CPUs run the
# workers at once, so that the trainer waits as long on any machine.
ROUNDS = os.environ.get("STEP_TRAINER_ROUNDS")
BATCH_MS = 30
MIN_ROUNDS = 60
# A slow loader (a rank reading from a slow node): each worker sleeps this
# long per batch.
WORKER_SLEEP = float(os.environ.get("STEP_TRAINER_WORKER_SLEEP_MS", "0")) / 1000


def rounds_per_batch():
    if ROUNDS:
        return int(ROUNDS)
    at_once = min(len(os.sched_getaffinity(0)), WORKERS)
    # Never fewer than the 60 it had: in a guest under full emulation
    # hashing is fast next to Python's start-up, which the wait is a share
    # of (Debian's 6.1 and 6.12 guests waited 0.16 of their life, not 0.2).
    return max(MIN_ROUNDS, hash_rounds(BATCH_MS * max(1, at_once / 2), CHUNK))


def worker(wid, data, steps, q, rounds):
    size = os.path.getsize(data)
    with open(data, "rb") as f:
        for step in range(wid, steps, WORKERS):
            f.seek((step * CHUNK) % max(size - CHUNK, 1))
            chunk = f.read(CHUNK)
            h = hashlib.sha256()
            for _ in range(rounds):
                h.update(chunk)
            if WORKER_SLEEP:
                time.sleep(WORKER_SLEEP)
            q.put((step, h.hexdigest()))


def main():
    data, steps, compute_ms, how = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    ctx = mp.get_context("fork")
    q = ctx.Queue(maxsize=2 * WORKERS)
    rounds = rounds_per_batch()
    procs = [ctx.Process(target=worker, args=(w, data, steps, q, rounds)) for w in range(WORKERS)]
    start = time.perf_counter_ns()
    for p in procs:
        p.start()
    blocked = 0
    waits = []
    mark = None
    if os.environ.get("STEP_TRAINER_MARKS") == "1":
        import mltrace_ebpf

        mark = mltrace_ebpf.mark
    # STEP_TRAINER_QUEUED=1: also the kernel's run delay inside the waits
    # (after a wake-up, queued for a CPU: the trace counts it as runnable).
    sched = os.open("/proc/thread-self/schedstat", os.O_RDONLY) if os.environ.get("STEP_TRAINER_QUEUED") == "1" else None
    run_delay = lambda: int(os.pread(sched, 96, 0).split()[1]) if sched is not None else 0
    queued = 0
    for _ in range(steps):
        if mark:
            mark("step")
        t, d = time.perf_counter_ns(), run_delay()
        q.get()
        waits.append(time.perf_counter_ns() - t)
        queued += run_delay() - d
        blocked += waits[-1]
        compute(compute_ms, how)
    total = time.perf_counter_ns() - start
    for p in procs:
        p.join()
    print(f"pid {os.getpid()}")
    print(f"total_ns {total}")
    print(f"blocked_ns {blocked}")
    print(f"blocked_queued_ns {queued}")
    print(f"rounds {rounds}")
    for i, p in enumerate(procs):
        print(f"worker{i} {p.pid}")
    for i, w in enumerate(waits):
        print(f"wait{i} {w}")


if __name__ == "__main__":
    main()
