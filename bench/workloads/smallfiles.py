"""(p) The Python small-file loader: an ImageFolder-style dataset read at
full speed by W forked worker processes, as a PyTorch DataLoader's workers
read it when decoding costs nothing.

    smallfiles.py DIR WORKERS [DECODE]

With DECODE (q), each file is also decoded in Python, as a light image
or token decoder would: a loop over its bytes (every 16th), holding the
GIL for about as long as the read.

DIR holds class subdirectories of files. The file list is built first (as
ImageFolder does when the dataset is made), then each worker opens, reads
whole and closes its share, in a shuffled order fixed by its seed. Prints
the ns from before the first fork to the last worker's exit, last. With
BENCH_GO (a FIFO), it waits for a byte there first.
"""

import os
import random
import sys
import time


def main():
    root, workers = sys.argv[1], int(sys.argv[2])
    decode = len(sys.argv) > 3
    files = []
    for d in sorted(e.path for e in os.scandir(root) if e.is_dir()):
        files.extend(sorted(e.path for e in os.scandir(d) if e.is_file()))
    random.Random(7919).shuffle(files)
    # Section 1's start signal (bench/src/go.rs): the bench reads the
    # files, then sends a byte.
    go = os.environ.get("BENCH_GO")
    if go:
        with open(go, "rb") as f:
            f.read(1)
    t0 = time.monotonic_ns()
    for w in range(workers):
        if os.fork() == 0:
            for p in files[w::workers]:
                with open(p, "rb") as f:
                    data = f.read()
                if decode:
                    acc = 0
                    for b in data[::16]:
                        acc = (acc * 31 + b) & 0xFFFF
            os._exit(0)
    for _ in range(workers):
        os.wait()
    print(time.monotonic_ns() - t0)


if __name__ == "__main__":
    main()
