"""A loader of small files, ImageFolder style: WORKERS forked processes (or
threads) each open, read whole and close their share of the files in DIR,
EPOCHS times. Then one read that waits (a pipe a thread fills 30 ms later) and one
that fails (a closed fd): what `record --detail summary` still records one
by one. Prints `key value` lines."""
import os
import sys
import threading
import time

data, workers, mode, epochs = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
names = sorted(os.listdir(data), key=int)


def load(w):
    n = 0
    for _ in range(epochs):
        for name in names[w::workers]:
            with open(os.path.join(data, name), "rb") as f:
                n += len(f.read())
    return n


# The loaders start together, as a DataLoader's workers live for the
# epoch: one that finished before the last was forked would not be
# counted among the workers alive at once.
if mode == "procs":
    go_r, go_w = os.pipe()
    pids = []
    for w in range(workers):
        pid = os.fork()
        if pid == 0:
            os.close(go_w)
            os.read(go_r, 1)
            load(w)
            os._exit(0)
        pids.append(pid)
    os.write(go_w, b"g" * workers)
    for pid in pids:
        os.waitpid(pid, 0)
    os.close(go_r)
    os.close(go_w)
else:
    start = threading.Barrier(workers)

    def started(w):
        start.wait()
        return load(w)

    ts = [threading.Thread(target=started, args=(w,)) for w in range(workers)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()

r, w = os.pipe()
# A thread, not a process: no worker that is not a loader.
writer = threading.Timer(0.03, os.write, (w, b"x" * 100))
writer.start()
t0 = time.monotonic_ns()
got = os.read(r, 100)
print("slow_read_ns", time.monotonic_ns() - t0)
writer.join()
fd = os.open(os.path.join(data, names[0]), os.O_RDONLY)
os.close(fd)
try:
    os.read(fd, 10)
except OSError:
    print("failed_read", 1)
print("file_bytes", sum(os.path.getsize(os.path.join(data, n)) for n in names) * epochs)
