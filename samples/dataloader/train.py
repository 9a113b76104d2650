#!/usr/bin/env python3
"""A stand-in for a PyTorch training job with a multi-worker DataLoader.

Needs only Python's standard library, so `mltrace record` can be tried on
any machine. What it does, in the order a tracer should show it:

1. preprocessing: the main process writes a few hundred sample shards
   (and an index) into a data directory;
2. training: N worker processes (forked, like DataLoader workers) each
   open, read in 64 KiB chunks and close the shards assigned to them, in a
   shuffled order, and hand "batches" to the main process over a queue;
3. the main process "computes" on each batch (CPU time standing in for the
   GPU step) and appends progress lines to a training log, from a logger
   thread, as real training scripts do;
4. after each epoch, a short evaluation re-reads a few shards.

Like an MLPerf reference implementation, it prints `:::MLLOG` lines
(init, run, epochs, evals, eval_accuracy) that `mltrace record` turns into
a "Training phases" track.
"""

import argparse
import hashlib
import json
import multiprocessing as mp
import os
import queue
import random
import threading
import time

CHUNK = 64 * 1024


def preprocess(data_dir, n_files, min_kib, max_kib, seed):
    os.makedirs(data_dir, exist_ok=True)
    rng = random.Random(seed)
    names = []
    for i in range(n_files):
        name = f"sample-{i:05d}.bin"
        size = rng.randint(min_kib, max_kib) * 1024
        with open(os.path.join(data_dir, name), "wb") as f:
            f.write(rng.randbytes(size))
        names.append(name)
    with open(os.path.join(data_dir, "index.txt"), "w") as f:
        f.write("\n".join(names) + "\n")
    return names


def worker(wid, data_dir, names, batch_files, out_q, seed):
    """Reads its share of the dataset the way a DataLoader worker does."""
    rng = random.Random(seed + wid)
    order = list(names)
    rng.shuffle(order)
    batch = []
    for name in order:
        h = hashlib.blake2b(digest_size=8)
        fd = os.open(os.path.join(data_dir, name), os.O_RDONLY)
        try:
            while True:
                chunk = os.read(fd, CHUNK)
                if not chunk:
                    break
                h.update(chunk)
        finally:
            os.close(fd)
        batch.append(h.hexdigest())
        if len(batch) == batch_files:
            out_q.put((wid, batch))
            batch = []
    if batch:
        out_q.put((wid, batch))
    out_q.put((wid, None))


def logger(log_path, lines):
    with open(log_path, "a", buffering=1) as log:
        while True:
            line = lines.get()
            if line is None:
                return
            log.write(line + "\n")


def train_step(batch, ms):
    # CPU work standing in for the accelerator step.
    end = time.perf_counter() + ms / 1000.0
    x = 0
    while time.perf_counter() < end:
        for item in batch:
            x ^= int(item, 16)
    return x


def mllog(key, value=None, event_type="POINT_IN_TIME", **metadata):
    """One line in mlperf_logging's format."""
    ev = {
        "namespace": "",
        "time_ms": int(time.time() * 1000),
        "event_type": event_type,
        "key": key,
        "value": value,
        "metadata": {"file": "train.py", **metadata},
    }
    print(":::MLLOG " + json.dumps(ev), flush=True)


def evaluate(data_dir, names, first, n):
    """Re-reads n shards; the "accuracy" is a hash-derived stand-in."""
    h = hashlib.sha1()
    for name in names[first : first + n]:
        with open(os.path.join(data_dir, name), "rb") as f:
            h.update(f.read())
    return round(0.5 + (h.digest()[0] / 255) * 0.4, 3)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default="mltrace-sample-data")
    ap.add_argument("--files", type=int, default=300)
    ap.add_argument("--min-kib", type=int, default=32)
    ap.add_argument("--max-kib", type=int, default=512)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-files", type=int, default=8)
    ap.add_argument("--step-ms", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    t0 = time.time()
    mllog("init_start", event_type="INTERVAL_START")
    names = preprocess(args.data_dir, args.files, args.min_kib, args.max_kib, args.seed)
    lines = queue.Queue()
    log_thread = threading.Thread(target=logger, args=(os.path.join(args.data_dir, "train.log"), lines))
    log_thread.start()
    lines.put(f"preprocessed {len(names)} files in {time.time() - t0:.2f} s")

    mllog("init_stop", event_type="INTERVAL_END")
    mllog("run_start", event_type="INTERVAL_START")
    ctx = mp.get_context("fork")
    step = 0
    for epoch in range(args.epochs):
        mllog("epoch_start", event_type="INTERVAL_START", epoch_num=epoch + 1)
        shards = [names[w :: args.workers] for w in range(args.workers)]
        out_q = ctx.Queue(maxsize=4 * args.workers)
        procs = [
            ctx.Process(target=worker, args=(w, args.data_dir, shards[w], args.batch_files, out_q, args.seed + epoch))
            for w in range(args.workers)
        ]
        for p in procs:
            p.start()
        done = 0
        while done < args.workers:
            wid, batch = out_q.get()
            if batch is None:
                done += 1
                continue
            train_step(batch, args.step_ms)
            step += 1
            if step % 5 == 0:
                lines.put(f"epoch {epoch} step {step} worker {wid} files {len(batch)}")
        for p in procs:
            p.join()
        lines.put(f"epoch {epoch} done at step {step}")
        mllog("epoch_stop", event_type="INTERVAL_END", epoch_num=epoch + 1)
        mllog("eval_start", event_type="INTERVAL_START", epoch_num=epoch + 1)
        acc = evaluate(args.data_dir, names, 20 * epoch, 20)
        mllog("eval_stop", event_type="INTERVAL_END", epoch_num=epoch + 1)
        mllog("eval_accuracy", acc, epoch_num=epoch + 1)
    mllog("run_stop", event_type="INTERVAL_END", status="success")
    lines.put(None)
    log_thread.join()
    print(f"trained {args.epochs} epochs, {step} steps, {len(names)} files, {time.time() - t0:.2f} s")


if __name__ == "__main__":
    main()
