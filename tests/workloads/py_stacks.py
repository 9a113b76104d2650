"""Reads files from Python code of every shape a stack can take and writes,
for each read, the Python stack it was made at: what a trace's stack of
that read must be, frame for frame.

    py_stacks.py DATA_DIR OUT_JSON

Makes a.bin, b.bin (16 KiB each) and np.bin (8.5 KiB) in DATA_DIR, opens
each once per process and reads them with os.pread (one pread64 syscall a
read) from: a chain of three nested functions, a generator (consumed by a
for loop, and by list(), a C function between the two frames), a method,
a staticmethod and a classmethod, a lambda (called directly, and by
map()), a list comprehension (its own frame before 3.12, inlined into
its function from 3.12), a threading.Thread, a child made with os.fork()
and children of multiprocessing's 'spawn' and 'forkserver' contexts; and
numpy.fromfile(f, count=..., offset=...) on an open file object, which
reads with read(2) (not pread64), through C stdio on a dup of the file's
fd: one read at offset 8192, asking for a stdio buffer (4096 or 8192
bytes) and returning the 512 to the end of the file (see numpy_read).
Every read has its own (path, offset). Each is noted on the line it was
made, with the frame it was made in, so the innermost frame's line is the
read's line; nothing else touches a file between the read and the note.

OUT_JSON: {"python": sys.version, "version": [3, 13, 0], "numpy": its
version or null, "skipped": {case: why}, "reads": [...]}, each read
{"case", "pid", "tid" (threading.get_native_id()), "path" (absolute,
symlinks resolved), "offset", "size" (bytes the syscall returned),
"syscall" ("pread64" or "read"), "stack"}: the stack innermost first,
each frame {"function" (co_qualname from 3.11, co_name before), "file"
(co_filename), "line" (f_lineno)}. Children write theirs to
DATA_DIR/stacks-PID.json, merged (and removed) by the parent.
"""
import glob
import json
import multiprocessing
import os
import sys
import threading

SIZE = 64
FILE_SIZE = 16384
NP_AT = 8192
NP_COUNT = 512
NP_FILE_SIZE = NP_AT + NP_COUNT
# Each case reads in its own 1 KiB slot of a.bin and b.bin: read k of a
# case is of file k % 2 at SLOT * 1024 + k * SIZE.
SLOTS = {
    "chain": 0, "generator": 1, "generator_list": 2, "method": 3,
    "staticmethod": 4, "classmethod": 5, "lambda": 6, "lambda_map": 7,
    "listcomp": 8, "thread": 9, "fork": 10, "spawn": 11, "forkserver": 12,
}

PATHS = []  # a.bin, b.bin, np.bin
FDS = []  # opened once in each process
RECORDS = []


def offset(case, k):
    return SLOTS[case] * 1024 + k * SIZE


def note(case, i, off, data, frame, syscall="pread64"):
    """Notes a read of file i made in frame (on the line of the read),
    returns its data. No I/O here: memory only."""
    stack = []
    f = frame
    while f is not None:
        code = f.f_code
        stack.append({"function": getattr(code, "co_qualname", code.co_name),
                      "file": code.co_filename, "line": f.f_lineno})
        f = f.f_back
    RECORDS.append({"case": case, "pid": os.getpid(), "tid": threading.get_native_id(),
                    "path": PATHS[i], "offset": off, "size": len(data),
                    "syscall": syscall, "stack": stack})
    return data


def open_files(data_dir):
    if not FDS:
        PATHS[:] = [os.path.join(data_dir, n) for n in ("a.bin", "b.bin", "np.bin")]
        FDS[:] = [os.open(p, os.O_RDONLY) for p in PATHS]


def dump(data_dir):
    """A child's records, for its parent to merge."""
    with open(os.path.join(data_dir, "stacks-%d.json" % os.getpid()), "w") as f:
        json.dump(RECORDS, f)


# A chain of three nested functions.
def chain_inner():
    for k in range(2):
        off = offset("chain", k)
        note("chain", k % 2, off, os.pread(FDS[k % 2], SIZE, off), sys._getframe())


def chain_middle():
    chain_inner()


def chain_outer():
    chain_middle()


# A generator.
def gen_reads(case, n):
    for k in range(n):
        off = offset(case, k)
        yield note(case, k % 2, off, os.pread(FDS[k % 2], SIZE, off), sys._getframe())


def run_generators():
    total = 0
    for data in gen_reads("generator", 3):
        total += len(data)
    total += len(list(gen_reads("generator_list", 2)))
    return total


# Methods.
class Reader:
    def __init__(self, case):
        self.case = case

    def read(self, k):
        off = offset(self.case, k)
        return note(self.case, k % 2, off, os.pread(FDS[k % 2], SIZE, off), sys._getframe())

    @staticmethod
    def read_static(k):
        off = offset("staticmethod", k)
        return note("staticmethod", k % 2, off, os.pread(FDS[k % 2], SIZE, off), sys._getframe())

    @classmethod
    def read_class(cls, k):
        off = offset("classmethod", k)
        return note("classmethod", k % 2, off, os.pread(FDS[k % 2], SIZE, off), sys._getframe())


def run_methods():
    r = Reader("method")
    r.read(0)
    r.read(1)
    Reader.read_static(0)
    Reader.read_static(1)
    Reader.read_class(0)
    r.read_class(1)


# Lambdas: called here, and by map() (C between the two frames).
def run_lambdas():
    read_at = lambda case, k: note(case, k % 2, offset(case, k), os.pread(FDS[k % 2], SIZE, offset(case, k)), sys._getframe())
    read_at("lambda", 0)
    read_at("lambda", 1)
    list(map(read_at, ["lambda_map"] * 2, range(2)))


# A list comprehension.
def run_listcomp():
    return [note("listcomp", k % 2, offset("listcomp", k), os.pread(FDS[k % 2], SIZE, offset("listcomp", k)), sys._getframe()) for k in range(3)]


# A thread.
def thread_reads():
    for k in range(2):
        off = offset("thread", k)
        note("thread", k % 2, off, os.pread(FDS[k % 2], SIZE, off), sys._getframe())


def run_thread():
    t = threading.Thread(target=thread_reads, name="py_stacks_reader")
    t.start()
    t.join()


# Children: os.fork, and multiprocessing's spawn and forkserver.
def child_reads(case):
    for k in range(2):
        off = offset(case, k)
        note(case, k % 2, off, os.pread(FDS[k % 2], SIZE, off), sys._getframe())


def run_fork(data_dir):
    pid = os.fork()
    if pid == 0:
        try:
            del RECORDS[:]
            child_reads("fork")
            dump(data_dir)
        except BaseException:
            import traceback
            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise SystemExit("py_stacks: the forked child failed (status %d)" % status)


def mp_child(data_dir, case):
    open_files(data_dir)
    child_reads(case)
    dump(data_dir)


def run_mp(data_dir, method):
    p = multiprocessing.get_context(method).Process(target=mp_child, args=(data_dir, method))
    p.start()
    p.join()
    if p.exitcode != 0:
        raise SystemExit("py_stacks: the %s child failed (exit code %s)" % (method, p.exitcode))


# numpy.fromfile: C between Python frames. It reads with stdio (fdopen of
# a dup of f's fd, fseek to f's position, fseek by offset, fread), and
# glibc's fseek reads from the block boundary below its target when the
# target is not on one (a read of the bytes before it, at another offset):
# here the target is on a boundary of any stdio buffer (4096 or 8192), so
# the one read is read(fd, buf, BUFFER) at NP_AT, returning the COUNT bytes
# to the end of np.bin.
def numpy_read(np, f):
    note("numpy", 2, NP_AT, np.fromfile(f, dtype=np.uint8, count=NP_COUNT, offset=NP_AT).tobytes(), sys._getframe(), "read")


def run_numpy(skipped):
    try:
        import numpy as np
    except ImportError as e:
        skipped["numpy"] = "numpy is not installed (%s)" % e
        return None
    with open(PATHS[2], "rb") as f:
        numpy_read(np, f)
    return np.__version__


def make_files(data_dir):
    for name, size in (("a.bin", FILE_SIZE), ("b.bin", FILE_SIZE), ("np.bin", NP_FILE_SIZE)):
        seed = ord(name[0])
        with open(os.path.join(data_dir, name), "wb") as f:
            f.write(bytes((i * 7 + seed) & 0xFF for i in range(size)))


def main():
    data_dir = os.path.realpath(sys.argv[1])
    out = sys.argv[2]
    os.makedirs(data_dir, exist_ok=True)
    for stale in glob.glob(os.path.join(data_dir, "stacks-*.json")):
        os.unlink(stale)
    make_files(data_dir)
    open_files(data_dir)
    skipped = {}
    chain_outer()
    run_generators()
    run_methods()
    run_lambdas()
    run_listcomp()
    # Forked while this is the only thread (3.12+ warns otherwise).
    run_fork(data_dir)
    run_thread()
    methods = multiprocessing.get_all_start_methods()
    for method in ("spawn", "forkserver"):
        if method in methods:
            run_mp(data_dir, method)
        else:
            skipped[method] = "not a start method here (%s)" % ", ".join(methods)
    # Last: importing numpy may start OpenBLAS's threads.
    np_version = run_numpy(skipped)
    for child in sorted(glob.glob(os.path.join(data_dir, "stacks-*.json"))):
        with open(child) as f:
            RECORDS.extend(json.load(f))
        os.unlink(child)
    with open(out, "w") as f:
        json.dump({"python": sys.version, "version": list(sys.version_info[:3]), "numpy": np_version,
                   "skipped": skipped, "reads": RECORDS}, f, indent=1)


if __name__ == "__main__":
    main()
