"""A trainer whose time goes to four things it times itself: waiting for
a forked loader (a pipe), waiting for the "GPU" (the stand-in libcuda's
cuStreamSynchronize, spinning or asleep), computing (spinning), and
writing and fsyncing a checkpoint. Prints what it measured as JSON.

breakdown.py OUT_DIR LIBCUDA|- STEPS LOADER_S GPU_S CPU_S CKPT_MIB spin|sleep"""
import ctypes
import json
import multiprocessing as mp
import os
import sys
import time



def since_start():
    """Seconds since this process started (the kernel's start time, in
    clock ticks since boot): the interpreter's start-up included, as the
    trace counts the process's main thread from its start."""
    with open("/proc/self/stat") as f:
        start = int(f.read().rsplit(")", 1)[1].split()[19])
    return time.clock_gettime(time.CLOCK_BOOTTIME) - start / os.sysconf("SC_CLK_TCK")


def loader(conn, steps, delay):
    # As a DataLoader worker: reads a sample, takes a while to decode it.
    for _ in range(steps):
        with open(__file__, "rb") as f:
            f.read()
        time.sleep(delay)
        conn.send_bytes(b"x" * 4096)


def spin(s):
    end = time.perf_counter() + s
    while time.perf_counter() < end:
        pass


def main():
    # The interpreter's start-up (imports: on CPU, reading modules).
    startup = since_start()
    out, lib_path, steps, load_s, gpu_s, cpu_s, ckpt_mib, mode = sys.argv[1:9]
    steps, load_s, gpu_s, cpu_s, ckpt_mib = int(steps), float(load_s), float(gpu_s), float(cpu_s), int(ckpt_mib)
    lib = None
    if lib_path != "-":
        lib = ctypes.CDLL(lib_path)
        lib.fakeCudaSet(ctypes.c_longlong(int(gpu_s * 1e9)), ctypes.c_int(mode == "spin"))
        lib.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
    got = {"data": 0.0, "gpu": 0.0, "cpu": 0.0, "io": 0.0, "startup": startup}
    parent, child = mp.Pipe(duplex=False)
    worker = mp.get_context("fork").Process(target=loader, args=(child, steps, load_s))
    worker.start()
    for step in range(steps):
        t = time.perf_counter()
        parent.recv_bytes()
        got["data"] += time.perf_counter() - t
        t = time.perf_counter()
        spin(cpu_s)
        got["cpu"] += time.perf_counter() - t
        if lib is not None:
            t = time.perf_counter()
            lib.cuStreamSynchronize(None)
            got["gpu"] += time.perf_counter() - t
        if step == steps // 2 and ckpt_mib:
            t = time.perf_counter()
            chunk = b"\0" * (8 << 20)
            with open(os.path.join(out, "ckpt.pt"), "wb") as f:
                for _ in range(ckpt_mib // 8):
                    f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
            got["io"] += time.perf_counter() - t
    worker.join()
    got["wall"] = since_start()
    print(json.dumps(got), flush=True)
    # No interpreter teardown after the clock stops: its tens of ms on CPU
    # (more on a busy machine) are in the process's life, which the
    # verdict's shares are of, but in none of the shares measured here.
    os._exit(0)


if __name__ == "__main__":
    main()
