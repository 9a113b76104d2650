"""A trainer in two phases of about PHASE_S seconds each, by its own clock:
first input-bound (a forked loader takes LOADER_S per batch, asleep, and
the trainer waits for it on a pipe), then CPU-bound (batches ready at
once, the trainer computing CPU_S per step). Its waits are real sleeps,
so the shares do not depend on how fast the machine is. Prints JSON: each
phase's start and end (Unix seconds) and the trainer's own data wait in it.

phased_trainer.py PHASE_S LOADER_S CPU_S"""
import json
import multiprocessing as mp
import sys
import time


def loader(conn, delays):
    while True:
        d = delays.recv()
        if d is None:
            return
        with open(__file__, "rb") as f:
            f.read()
        time.sleep(d)
        conn.send_bytes(b"x" * 4096)


def spin(s):
    end = time.perf_counter() + s
    while time.perf_counter() < end:
        pass


def main():
    phase_s, loader_s, cpu_s = map(float, sys.argv[1:4])
    data_r, data_w = mp.Pipe(duplex=False)
    ask_r, ask_w = mp.Pipe(duplex=False)
    p = mp.Process(target=loader, args=(data_w, ask_r))
    p.start()
    phases = []
    for name, delay, compute in (("input", loader_s, cpu_s / 10), ("cpu", 0.0, cpu_s)):
        start = time.time()
        waited = 0.0
        while time.time() - start < phase_s:
            ask_w.send(delay)
            t = time.perf_counter()
            data_r.recv_bytes()
            waited += time.perf_counter() - t
            spin(compute)
        end = time.time()
        phases.append({"name": name, "start": start, "end": end, "data_wait": waited / (end - start)})
    ask_w.send(None)
    p.join()
    print(json.dumps({"phases": phases}))


if __name__ == "__main__":
    main()
