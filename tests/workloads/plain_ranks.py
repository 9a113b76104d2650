"""Plain ranks, no collectives: a launcher starts N trainers (each its own
Python, with RANK set as a launcher would), each taking STEPS batches from
one forked loader that reads a 256 KiB batch of DATA and takes LOADER_MS
a batch (sleeping the rest: a loader waiting on storage) and computing COMPUTE_MS per step (sleeping: an
accelerator). Rank SLOW's loader takes SLOW_MS a batch.

    plain_ranks.py DATA N STEPS COMPUTE_MS LOADER_MS SLOW SLOW_MS

Each rank prints `pid_R PID`, `blocked_ns_R NS` (its time in the
queue's get) and `total_ns_R NS` (its first request to its last step's
end) once done.
"""
import multiprocessing as mp
import os
import subprocess
import sys
import time

from compute import compute


def loader(q, data, steps, ms):
    with open(data, "rb") as f:
        for i in range(steps):
            t = time.perf_counter()
            f.seek(0)
            f.read(256 << 10)
            time.sleep(max(0.0, ms / 1000 - (time.perf_counter() - t)))
            q.put(i)


def rank(data, steps, compute_ms, loader_ms):
    ctx = mp.get_context("fork")
    q = ctx.Queue(maxsize=2)
    start = time.perf_counter_ns()
    p = ctx.Process(target=loader, args=(q, data, steps, loader_ms))
    p.start()
    blocked = 0
    for _ in range(steps):
        t = time.perf_counter_ns()
        q.get()
        blocked += time.perf_counter_ns() - t
        compute(compute_ms, "sleep")
    total = time.perf_counter_ns() - start
    p.join()
    r = os.environ["RANK"]
    # One write for the three lines: the ranks share stdout, and print
    # writes its newline apart when Python is unbuffered (PYTHONUNBUFFERED).
    os.write(1, f"pid_{r} {os.getpid()}\nblocked_ns_{r} {blocked}\ntotal_ns_{r} {total}\n".encode())


def main():
    if sys.argv[1] == "rank":
        rank(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]))
        return
    data, n, steps, compute_ms, loader_ms, slow, slow_ms = sys.argv[1:8]
    procs = []
    for r in range(int(n)):
        ms = slow_ms if r == int(slow) else loader_ms
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=n)
        procs.append(subprocess.Popen([sys.executable, __file__, "rank", data, steps, compute_ms, ms], env=env))
    sys.exit(max(p.wait() for p in procs))


if __name__ == "__main__":
    main()
