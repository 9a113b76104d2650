"""The module without a recorder (no-ops), and what it writes to a pipe
named like the recorder names it. Run: PYTHONPATH=python python3 -m unittest
discover -s python/tests"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

CALLS = (
    "import mltrace_ebpf as mltrace\n"
    "print(mltrace.recording())\n"
    "with mltrace.phase('eval', epoch_num=2):\n"
    "    mltrace.mark('loss', 0.25)\n"
    "mltrace.mark('done')\n"
)


def run(code, env_extra, pass_fds=()):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLTRACE_")}
    env.update(env_extra)
    env["PYTHONPATH"] = SRC
    return subprocess.run(
        [sys.executable, "-c", code], env=env, pass_fds=pass_fds, capture_output=True, text=True, check=True
    )


class Module(unittest.TestCase):
    def test_without_recorder_calls_do_nothing(self):
        out = run(CALLS, {})
        self.assertEqual(out.stdout, "False\n")
        self.assertEqual(out.stderr, "")

    def test_a_file_at_the_fd_gets_nothing(self):
        with tempfile.TemporaryFile() as f:
            fd = f.fileno()
            out = run(CALLS, {"MLTRACE_MLLOG_FD": str(fd), "MLTRACE_MLLOG_INODE": str(os.fstat(fd).st_ino)}, (fd,))
            self.assertEqual(out.stdout, "True\n")
            f.seek(0)
            self.assertEqual(f.read(), b"")

    def test_the_pipe_gets_one_mllog_line_per_call(self):
        r, w = os.pipe()
        try:
            out = run(CALLS, {"MLTRACE_MLLOG_FD": str(w), "MLTRACE_MLLOG_INODE": str(os.fstat(w).st_ino)}, (w,))
            os.close(w)
            w = None
            with os.fdopen(r) as f:
                lines = f.read().splitlines()
        finally:
            if w is not None:
                os.close(w)
        self.assertEqual(out.stdout, "True\n")
        self.assertTrue(all(line.startswith(":::MLLOG {") for line in lines), lines)
        recs = [json.loads(line[len(":::MLLOG "):]) for line in lines]
        got = [(x["key"], x["event_type"], x["value"]) for x in recs]
        self.assertEqual(
            got,
            [
                ("eval_start", "INTERVAL_START", None),
                ("loss", "POINT_IN_TIME", 0.25),
                ("eval_stop", "INTERVAL_END", None),
                ("done", "POINT_IN_TIME", None),
            ],
        )
        self.assertEqual(recs[0]["metadata"]["epoch_num"], 2)
        self.assertEqual(len({x["metadata"]["pid"] for x in recs}), 1)
        times = [x["time_ms"] for x in recs]
        self.assertEqual(times, sorted(times))

    def test_phase_boundary_names_are_refused(self):
        import importlib
        import sys as _sys

        _sys.path.insert(0, SRC)
        mltrace = importlib.import_module("mltrace_ebpf")
        with self.assertRaises(ValueError):
            mltrace.mark("eval_start")
        with self.assertRaises(ValueError):
            mltrace.phase("")


if __name__ == "__main__":
    unittest.main()
