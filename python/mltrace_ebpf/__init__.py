"""Training phases and marks on mltrace's timeline, and its Parquet tables.

Under ``mltrace record`` the command gets a pipe of its own, named by
``MLTRACE_MLLOG_FD``; :func:`phase` and :func:`mark` write MLPerf-logging
(``:::MLLOG``) lines to it, which the recorder turns into Phase and Mark
records. The command's stdout and stderr are not touched. Without the
recorder both are no-ops.
"""

import json
import os
import stat
import time

__all__ = ["phase", "mark", "load", "recording"]

_FD_ENV = "MLTRACE_MLLOG_FD"
_INODE_ENV = "MLTRACE_MLLOG_INODE"


def _channel():
    try:
        return int(os.environ[_FD_ENV]), int(os.environ[_INODE_ENV])
    except (KeyError, ValueError):
        return None


# Decided once, at import: not recorded means every call returns at once.
_chan = _channel()
_seq = 0


def recording():
    """Whether phases and marks reach a recorder."""
    return _chan is not None


def _emit(key, event_type, value, metadata):
    """Writes one MLLOG line; turns itself off if the pipe is gone."""
    global _chan, _seq
    if _chan is None:
        return
    fd, inode = _chan
    try:
        # The fd must still be the recorder's pipe: a process started by
        # subprocess inherits the variables but not the fd, whose number
        # may then belong to one of its own files.
        st = os.fstat(fd)
        if not stat.S_ISFIFO(st.st_mode) or st.st_ino != inode:
            _chan = None
            return
        _seq += 1
        md = {"pid": os.getpid(), "seq": _seq}
        rank = os.environ.get("RANK")
        if rank is not None and rank.isdigit():
            md["rank"] = int(rank)
        md.update(metadata)
        rec = {
            "namespace": "",
            # Float milliseconds: the recorder keeps the fraction.
            "time_ms": time.time_ns() / 1e6,
            "event_type": event_type,
            "key": key,
            "value": value,
            "metadata": md,
        }
        line = ":::MLLOG " + json.dumps(rec, default=str) + "\n"
        # One write per line: under PIPE_BUF (4096 bytes) it is atomic, so
        # lines from several processes never interleave.
        os.write(fd, line.encode())
    except OSError:
        _chan = None


def _check_name(name):
    if not isinstance(name, str) or not name:
        raise ValueError("mltrace: a phase or mark needs a non-empty string name")
    if name.endswith(("_start", "_stop")):
        raise ValueError("mltrace: names ending in _start or _stop are MLLOG's phase boundaries: use phase()")


class _Phase:
    __slots__ = ("name", "metadata")

    def __init__(self, name, metadata):
        self.name = name
        self.metadata = metadata

    def __enter__(self):
        _emit(self.name + "_start", "INTERVAL_START", None, self.metadata)
        return self

    def __exit__(self, exc_type, exc, tb):
        md = self.metadata
        if exc_type is not None:
            md = dict(md, status="aborted")
        _emit(self.name + "_stop", "INTERVAL_END", None, md)
        return False


class _NoPhase:
    __slots__ = ()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        return False


_NO_PHASE = _NoPhase()


def phase(name, **metadata):
    """A context manager: the block is a phase named ``name`` on the timeline.

    ``name`` as in MLLOG: ``"eval"`` gives ``EVAL``, ``"epoch"`` with
    ``epoch_num=3`` gives ``EPOCH 3``, anything else its upper-case name.
    ``metadata`` goes into the MLLOG record (JSON-serialisable values).
    """
    _check_name(name)
    if _chan is None:
        return _NO_PHASE
    return _Phase(name, metadata)


def mark(name, value=None):
    """A point in time named ``name``, with an optional value (JSON)."""
    _check_name(name)
    if _chan is None:
        return
    _emit(name, "POINT_IN_TIME", value, {})


def load(path):
    """The tables of ``mltrace export --parquet RUN.bin -o DIR``, read from
    DIR, as a dict of table name -> pandas.DataFrame."""
    try:
        import pandas
    except ImportError as e:
        raise ImportError(
            "mltrace_ebpf.load needs pandas and pyarrow: pip install 'mltrace-ebpf[pandas]' (or the wheel with [pandas])"
        ) from e
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(
            f"{path}: not a directory; make one with `mltrace export --parquet RUN.bin -o DIR`"
        )
    names = sorted(f for f in os.listdir(path) if f.endswith(".parquet"))
    if not names:
        raise FileNotFoundError(f"{path}: no .parquet tables in it")
    return {f[: -len(".parquet")]: pandas.read_parquet(os.path.join(path, f)) for f in names}
