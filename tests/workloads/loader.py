"""A trainer with 4 DataLoader-style workers (forked, no exec), as
PyTorch's DataLoader starts them, plus a shell helper, a thread that
writes and a pool of idle threads (as torch's intra-op pool at import):
more threads than get a calls track, seen only by their scheduling."""
import multiprocessing as mp
import os
import subprocess
import sys
import threading


def worker(wid, paths, q, done):
    n = 0
    for p in paths[wid::4]:
        with open(p, "rb") as f:
            while True:
                b = f.read(65536)
                if not b:
                    break
                n += len(b)
    q.put((wid, n))
    # Alive until all four have read, as a DataLoader's workers are for an
    # epoch: the tests count the workers at once, which a fast one exiting
    # before the last starts would make a race.
    done.wait()


def main():
    data = sys.argv[1]
    os.makedirs(data, exist_ok=True)
    paths = []
    for i in range(32):
        p = os.path.join(data, f"s{i:03d}.bin")
        with open(p, "wb") as f:
            f.write(os.urandom(256 * 1024))
        paths.append(p)
    subprocess.run(["sh", "-c", "cat /etc/hostname > /dev/null"], check=True)
    log = threading.Thread(target=lambda: open(os.path.join(data, "log.txt"), "w").write("step\n"))
    log.start()
    log.join()
    go = threading.Event()
    pool = [threading.Thread(target=go.wait) for _ in range(16)]
    for t in pool:
        t.start()
    go.set()
    for t in pool:
        t.join()
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    done = ctx.Event()
    ws = [ctx.Process(target=worker, args=(i, paths, q, done)) for i in range(4)]
    for w in ws:
        w.start()
    total = sum(q.get()[1] for _ in ws)
    done.set()
    for w in ws:
        w.join()
    print("read", total)


if __name__ == "__main__":
    main()
