"""A trainer whose time goes to four things it times itself: waiting for
a forked loader (a pipe), waiting for the "GPU" (the stand-in libcuda's
cuStreamSynchronize, spinning or asleep), computing (spinning), and
writing and fsyncing a checkpoint. Prints what it measured as JSON: each
part's seconds, and of each wait (data, gpu, io) the seconds the kernel
counts as queued for a CPU (data_queued...): on a busy machine a wait's
end can be followed by milliseconds in the run queue, which this clock
counts in the wait and the trace as runnable. And its main thread's time
on a CPU outside the GPU and checkpoint calls (on_cpu, by its CPU clock:
the interpreter's start-up included): how much it computed rather than
queued for a CPU, on a machine others share; and all the time the kernel
counts it queued for a CPU (queued). And of its computing, the time
neither its CPU clock nor its run delay counted (cpu_lost): its CPU
taken by the hypervisor, which a trace counts on CPU.

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


SCHEDSTAT = None


def queued():
    """Seconds the main thread has waited for a CPU (the kernel's run
    delay; the file opened once, not traced as an open per wait)."""
    global SCHEDSTAT
    if SCHEDSTAT is None:
        SCHEDSTAT = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
    return int(os.pread(SCHEDSTAT, 96, 0).split()[1]) / 1e9


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
    got.update({"data_queued": 0.0, "gpu_queued": 0.0, "io_queued": 0.0, "cpu_lost": 0.0})
    in_calls = 0.0
    parent, child = mp.Pipe(duplex=False)
    worker = mp.get_context("fork").Process(target=loader, args=(child, steps, load_s))
    worker.start()
    for step in range(steps):
        t, q = time.perf_counter(), queued()
        parent.recv_bytes()
        got["data"] += time.perf_counter() - t
        got["data_queued"] += queued() - q
        t, q, c = time.perf_counter(), queued(), time.thread_time()
        spin(cpu_s)
        got["cpu"] += time.perf_counter() - t
        # Spinning, neither its CPU clock nor its run delay moved: the
        # hypervisor had its CPU (the trace counts that on CPU).
        got["cpu_lost"] += max(0.0, time.perf_counter() - t - (time.thread_time() - c) - (queued() - q))
        if lib is not None:
            t, q, c = time.perf_counter(), queued(), time.thread_time()
            lib.cuStreamSynchronize(None)
            got["gpu"] += time.perf_counter() - t
            got["gpu_queued"] += queued() - q
            in_calls += time.thread_time() - c
        if step == steps // 2 and ckpt_mib:
            # Made before the clock: on a machine short of memory its page
            # faults reclaim, on a CPU but in no file call.
            chunk = b"\0" * (8 << 20)
            t, q, c = time.perf_counter(), queued(), time.thread_time()
            with open(os.path.join(out, "ckpt.pt"), "wb") as f:
                for _ in range(ckpt_mib // 8):
                    f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
            got["io"] += time.perf_counter() - t
            got["io_queued"] += queued() - q
            in_calls += time.thread_time() - c
    worker.join()
    got["wall"] = since_start()
    got["on_cpu"] = time.thread_time() - in_calls
    got["queued"] = queued()
    print(json.dumps(got), flush=True)
    # No interpreter teardown after the clock stops: its tens of ms on CPU
    # (more on a busy machine) are in the process's life, which the
    # verdict's shares are of, but in none of the shares measured here.
    os._exit(0)


if __name__ == "__main__":
    main()
