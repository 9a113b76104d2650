"""A loader's look over a dataset of many small files before it reads a
byte: os.walk over ROOT and os.stat of every file (getdents64 and
newfstatat, no reads).

    walk_stat.py ROOT

Prints `key value` lines: its `pid`, the directories walked (`dirs`, ROOT
too) and the files stat'ed (`files`) with their bytes (`bytes`)."""

import os
import sys

dirs = files = size = 0
for top, _, names in os.walk(sys.argv[1]):
    dirs += 1
    for name in names:
        size += os.stat(os.path.join(top, name)).st_size
        files += 1
print("pid", os.getpid())
print("dirs", dirs)
print("files", files)
print("bytes", size)
