"""Phases and marks through the mltrace_ebpf module, with this script's own
clock around each call written to the file named by argv[1] (not stdout)."""

import json
import os
import subprocess
import sys
import time

import mltrace_ebpf as mltrace

clock = []


def at(what):
    clock.append((what, time.time_ns()))


print("recording:", mltrace.recording(), flush=True)
at("eval<")
with mltrace.phase("eval", epoch_num=1):
    at("eval>")
    time.sleep(0.05)
    at("/eval<")
at("/eval>")
at("loss<")
mltrace.mark("loss", 0.5)
at("loss>")
# The same phase twice in a row, and the same mark again: all kept.
for i in range(2):
    at(f"load{i}<")
    with mltrace.phase("data_load"):
        time.sleep(0.02)
    at(f"/load{i}>")
mltrace.mark("loss", 0.5)
# A forked child (a DataLoader worker) has the pipe too.
pid = os.fork()
if pid == 0:
    mltrace.mark("worker", os.getpid())
    os._exit(0)
os.waitpid(pid, 0)
# A subprocess does not get the fd (close_fds) but does get the variables:
# whatever it opens at that number must not receive MLLOG lines.
decoy = os.path.join(os.path.dirname(sys.argv[1]), "decoy")
code = (
    "import os, mltrace_ebpf as mltrace\n"
    f"f = os.open({decoy!r}, os.O_WRONLY | os.O_CREAT)\n"
    "os.dup2(f, int(os.environ['MLTRACE_MLLOG_FD']))\n"
    "mltrace.mark('decoy')\n"
)
subprocess.run([sys.executable, "-c", code], check=True)
print("done", flush=True)
with open(sys.argv[1], "w") as f:
    json.dump({"clock": clock, "worker": pid}, f)
