"""A trainer whose data loaders are threads of its own process, measuring
its own waits for them.

    thread_loader.py pool DIR STEPS COMPUTE_MS sleep|spin
    thread_loader.py tfdata DIR STEPS COMPUTE_MS sleep|spin

`pool`: two threads read 1 MiB files of DIR and hash them (standing in
for decoding; hashlib lets go of the GIL) into a `queue.Queue`; the main
thread times each `get()`. Hashing takes about 50 ms of one CPU a file
here and on any machine (its rounds are measured first).
`tfdata`: a TensorFlow `tf.data` pipeline: the files read with a
parallel map that also decodes them (matrix products, about 40 ms of one
CPU a file), batched by 4, prefetched 2; the main thread times each
`next()`. Each op runs on one thread and the number of products is
measured on this CPU first: with a fixed count, a faster CPU (or TF
spreading one product over many) made the loader keep up and the trainer
wait 0.3 s instead of about a second.
Either way the files are written first and dropped from the page cache
(the loaders read from storage), and the trainer computes COMPUTE_MS
per step by sleeping or spinning. It prints `key value` lines: `pid`,
`total_ns` (its first request to its last batch), `blocked_ns` (time
waiting for batches) and `steps`.
"""
import hashlib
import os
import queue
import sys
import threading
import time

from compute import compute, hash_rounds

FILE = 1 << 20
# Hash rounds per file (pool): measured when unset, for HASH_MS a file
# whatever the CPU's speed.
ROUNDS = os.environ.get("THREAD_LOADER_ROUNDS")
HASH_MS = 50
# Matrix products per file (tfdata): measured when unset.
PRODUCTS = os.environ.get("THREAD_LOADER_PRODUCTS")
DECODE_MS = 40


def make_files(d, n):
    os.makedirs(d, exist_ok=True)
    paths = []
    for i in range(n):
        p = os.path.join(d, f"shard-{i:04d}.bin")
        if not os.path.exists(p) or os.path.getsize(p) != FILE:
            with open(p, "wb") as f:
                f.write(os.urandom(FILE))
        paths.append(p)
    os.sync()
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    return paths


def rounds_per_file():
    """How many rounds of hashing 1 MiB take HASH_MS here."""
    # Never fewer than the 80 it had (see step_trainer.py: a slow, emulated
    # machine needs them).
    return int(ROUNDS) if ROUNDS else max(80, hash_rounds(HASH_MS, FILE))


def pool(paths, steps, ms, how):
    q = queue.Queue(maxsize=4)
    per_batch = 2
    rounds = rounds_per_file()

    def loader(k):
        for step in range(k, steps, 2):
            h = hashlib.sha256()
            for j in range(per_batch):
                with open(paths[(step * per_batch + j) % len(paths)], "rb") as f:
                    chunk = f.read()
                for _ in range(rounds):
                    h.update(chunk)
            q.put((step, h.hexdigest()))

    threads = [threading.Thread(target=loader, args=(k,), name=f"loader{k}") for k in range(2)]
    start = time.perf_counter_ns()
    for t in threads:
        t.start()
    blocked = 0
    for _ in range(steps):
        t0 = time.perf_counter_ns()
        q.get()
        blocked += time.perf_counter_ns() - t0
        compute(ms, how)
    total = time.perf_counter_ns() - start
    for t in threads:
        t.join()
    return total, blocked


def products_per_file(tf):
    """How many 1024x1024 products take DECODE_MS on one thread here."""
    if PRODUCTS:
        return int(PRODUCTS)
    x = tf.random.uniform([1024, 1024])
    tf.matmul(x, x).numpy()  # warm up
    n = 5
    t0 = time.perf_counter()
    for _ in range(n):
        x = tf.matmul(x, x) / 1024.0
    x.numpy()
    each = (time.perf_counter() - t0) * 1000 / n
    # Never fewer than the 2 it had.
    return max(2, round(DECODE_MS / each))


def tfdata(paths, steps, ms, how):
    import tensorflow as tf

    products = products_per_file(tf)

    def decode(path):
        raw = tf.io.decode_raw(tf.io.read_file(path), tf.uint8)
        x = tf.reshape(tf.cast(raw, tf.float32), [1024, 1024]) / 255.0
        for _ in range(products):
            x = tf.matmul(x, x) / 1024.0
        return tf.reduce_sum(x)

    ds = tf.data.Dataset.from_tensor_slices(paths[: steps * 4])
    ds = ds.map(decode, num_parallel_calls=2).batch(4).prefetch(2)
    start = time.perf_counter_ns()
    it = iter(ds)
    blocked = 0
    for _ in range(steps):
        t0 = time.perf_counter_ns()
        next(it)
        blocked += time.perf_counter_ns() - t0
        compute(ms, how)
    total = time.perf_counter_ns() - start
    return total, blocked


def main():
    mode, d, steps, ms, how = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
    if mode == "tfdata":
        # TensorFlow's own threads, before the clock starts; one thread an
        # op, so a decode costs one CPU whatever the machine's size.
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(1)
    paths = make_files(d, steps * (4 if mode == "tfdata" else 2))
    total, blocked = (pool if mode == "pool" else tfdata)(paths, steps, ms, how)
    print(f"pid {os.getpid()}")
    print(f"total_ns {total}")
    print(f"blocked_ns {blocked}")
    print(f"steps {steps}")


if __name__ == "__main__":
    main()
