"""A thread that reads one file once and then sits idle, while the main
thread reads another, whole, over and over for SECONDS (by its own clock).

    idle_thread.py A B SECONDS exit|stay

`exit`: both threads end and the process exits. `stay`: it prints "ready",
starts at a line on stdin, and after its reads stays alive until killed
(an attached recording ends while it lives). Prints what it read."""

import sys
import threading
import time

a, b, seconds, how = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
if how == "stay":
    print("ready", flush=True)
    sys.stdin.readline()
done = threading.Event()
got = {}


def idle():
    with open(a, "rb") as f:
        got["a"] = len(f.read())
    done.wait()


t = threading.Thread(target=idle)
t.start()
n = reads = 0
t0 = time.monotonic()
while time.monotonic() - t0 < seconds:
    with open(b, "rb") as f:
        n += len(f.read())
    reads += 1
    time.sleep(0.001)
while "a" not in got:
    time.sleep(0.01)
print(f"a_bytes {got['a']}\nb_bytes {n}\nb_reads {reads}", flush=True)
if how == "stay":
    time.sleep(3600)
done.set()
t.join()
