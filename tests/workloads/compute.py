"""A trainer's compute step, for the test workloads: `sleep` (as storage
benchmarks emulate an accelerator: its timer ends the sleep) or `spin`
(on a CPU for the whole step)."""
import time


def compute(ms, how):
    if how == "sleep":
        time.sleep(ms / 1000)
        return
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass
