#!/usr/bin/env python3
"""Generates the line table fixtures that linetable.rs tests against (py39.json .. py313.json).

Rerun from anywhere with any python3:

    python3 crates/capture/src/python/testdata/gen_linetables.py

It reruns itself under each interpreter in $LINETABLE_PYTHONS (space separated paths; default:
pyenv's 3.9.18 3.10.13 3.11.7 3.12.1 3.13.0). Each one compiles the module in MODULE (plus a
`-X no_debug_ranges` build on 3.11+, whose tables use the no-column entry kind), walks every code
object and records its raw line table (co_lnotab up to 3.9, co_linetable after), co_firstlineno and
the line of every code unit, up to a few units past the end. The lines come from the interpreter
itself: the C function PyCode_Addr2Line (via ctypes), cross-checked against dis.findlinestarts
(3.9), co_lines() (3.10+), co_positions() and dis.get_instructions() (3.11+). Any disagreement
between them aborts the run.

Fixture format: {"python": version, "format": "Lnotab"|"Linetable310"|"Locations", "code": [
{"name": qualified name, "first": co_firstlineno, "units": code length in 2-byte units,
 "table": hex line table, "lines": [[line or null, run length in units], ...]}, ...]}
"""

import json
import os
import subprocess
import sys

PYENV = "/root/.pyenv/versions"
DEFAULT_PYTHONS = ["3.9.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0"]
# Units past the end of the bytecode to record (3.9 keeps the last line there, 3.10+ has none).
PAST_END = 3


def gap(n):
    """n lines with no code, to force big line deltas."""
    return "\n" * n


def wide_call(n):
    """One line whose bytecode exceeds 255 bytes and whose columns exceed 127."""
    return "    x = [" + ", ".join("a + %d" % i for i in range(n)) + "]\n    return x\n"


MODULE = (
    '''"""Module docstring."""
import os

CONST = 3


def decorator(f):
    def wrapper(*args, **kwargs):
        # a comment: no code here

        return f(*args, **kwargs)
    return wrapper


@decorator
@decorator
def decorated(x,
              y=2):
    return x + y


class Thing:
    attr = [i * i for i in range(3)]

    def __init__(self, n):
        self.n = n

    @property
    def twice(self):
        return self.n * 2

    @staticmethod
    def static(a, b):
        return {k: v for k, v in zip(a, b)}

    class Inner:
        def method(self):
            return lambda q: q + 1


def loops(xs):
    total = 0
    for x in xs:
        if x % 2:
            continue
        total += x
    while total > 10:
        total -= 3
        if total == 11:
            break
    else:
        total = -1
    return total


def multi_line_call(a, b):
    result = max(
        a,
        b,
        key=lambda v: (
            v
            * 2
        ),
    )
    return result


def handlers(path):
    try:
        with open(path) as f:
            data = f.read()
    except FileNotFoundError as e:
        data = str(e)
    except (OSError, ValueError):
        data = None
    else:
        data = data.strip()
    finally:
        path = None
    return data


def generator(n):
    yield 1
    yield from range(n)
    return (i for i in range(n) if i)


async def coroutine(aw):
    async with aw as v:
        await v
    async for item in aw:
        pass
    return [x async for x in aw]


def comprehensions(m):
    return (
        [x for x in m],
        {x for x in m if x},
        {x: y for x, y in m.items()},
        [[y for y in x] for x in m],
    )


def big_jumps(a):
    b = a + 1'''
    + gap(130)
    + """    c = b + 1"""
    + gap(300)
    + """    d = c + 1
    with open(a) as f:
        e = f"""
    + gap(140)
    + """        e = e + d
    g = h(a,"""
    + gap(260)
    + """          b)
    return b, c, d, e, g


def wide(a):
"""
    + wide_call(150)
    + """

def nested_closures(a):
    def outer(b):
        def inner(c):
            return a + b + c
        return inner
    return outer(1)(2)


def conditional(x):
    y = x if x else -x
    assert y >= 0, "negative"
    del x
    return not y and y or 0


def empty():
    pass


def only_docstring():
    \"\"\"Nothing else.\"\"\"


result = [decorated(1), loops([1, 2, 3]), Thing(2).twice]
"""
    + gap(3000)
    + """

def far_down(x):
    # This function starts past line 3000.
    return x * 2
"""
    + gap(70000)
    + """

def very_far_down(x):
    for i in range(x):
        x += i
    return x
"""
)

MATCH = """

def matcher(command):
    match command.split():
        case [action]:
            return action
        case [action, obj]:
            return action, obj
        case {"x": x, **rest} if x > 0:
            return rest
        case _:
            return None
"""


def module_source():
    # match statements need 3.10+; the rest compiles everywhere.
    return MODULE + (MATCH if sys.version_info >= (3, 10) else "")


def modules():
    """The test module, then real code: two stdlib modules as this interpreter ships them."""
    import json.decoder
    import textwrap

    yield compile(module_source(), "linetable_module.py", "exec")
    for m in (textwrap, json.decoder):
        with open(m.__file__) as f:
            yield compile(f.read(), m.__file__, "exec")


def addr2line():
    import ctypes

    f = ctypes.pythonapi.PyCode_Addr2Line
    f.argtypes = [ctypes.py_object, ctypes.c_int]
    f.restype = ctypes.c_int
    return f


def walk(co, prefix=""):
    """Every code object in co, with a name for test messages: file:qualified.name."""
    if not prefix:
        prefix = os.path.basename(co.co_filename) + ":"
    name = prefix + co.co_name
    if hasattr(co, "co_qualname"):
        name = prefix.split(":")[0] + ":" + co.co_qualname
    yield name, co
    for c in co.co_consts:
        if hasattr(c, "co_code"):
            yield from walk(c, prefix if co.co_name == "<module>" else name + ".")


def oracle_lines(co, c_addr2line):
    """The line per 2-byte unit, None for no line, checked against every view CPython offers."""
    import dis

    size = len(co.co_code)
    units = size // 2 + PAST_END
    lines = []
    for u in range(units):
        line = c_addr2line(co, 2 * u)
        lines.append(None if line < 0 else line)

    def check(what, offset, expected):
        if lines[offset // 2] != expected:
            sys.exit("%s disagrees at %s offset %d: %r != %r" % (what, co, offset, expected, lines[offset // 2]))

    if sys.version_info < (3, 10):
        starts = list(dis.findlinestarts(co))
        for off in range(0, size, 2):
            line = None
            for start, ln in starts:
                if start <= off:
                    line = ln
            check("findlinestarts", off, line)
    else:
        covered = set()
        for start, end, line in co.co_lines():
            for off in range(start, end, 2):
                check("co_lines", off, line)
                covered.add(off)
        for off in range(0, size, 2):
            if off not in covered:
                check("co_lines gap", off, None)
    if sys.version_info >= (3, 11):
        positions = list(co.co_positions())
        if len(positions) != size // 2:
            sys.exit("co_positions length %d for %d bytes" % (len(positions), size))
        for u, pos in enumerate(positions):
            check("co_positions", 2 * u, pos[0])
        for ins in dis.get_instructions(co):
            check("dis positions", ins.offset, ins.positions.lineno)
    return lines


def rle(lines):
    runs = []
    for line in lines:
        if runs and runs[-1][0] == line:
            runs[-1][1] += 1
        else:
            runs.append([line, 1])
    return runs


def emit():
    """Child mode: print this interpreter's records as JSON."""
    c_addr2line = addr2line()
    tag = "nodebug:" if "no_debug_ranges" in sys._xoptions else ""
    records = []
    for name, co in (c for top in modules() for c in walk(top)):
        table = co.co_lnotab if sys.version_info < (3, 10) else co.co_linetable
        records.append(
            {
                "name": tag + name,
                "first": co.co_firstlineno,
                "units": len(co.co_code) // 2,
                "table": table.hex(),
                "lines": rle(oracle_lines(co, c_addr2line)),
            }
        )
    json.dump(records, sys.stdout)


def fmt(version):
    if version < (3, 10):
        return "Lnotab"
    if version < (3, 11):
        return "Linetable310"
    return "Locations"


def drive():
    here = os.path.dirname(os.path.abspath(__file__))
    env = os.environ.get("LINETABLE_PYTHONS")
    pythons = env.split() if env else [os.path.join(PYENV, v, "bin", "python3") for v in DEFAULT_PYTHONS]
    for python in pythons:
        info = subprocess.check_output([python, "-c", "import sys; print(sys.version.split()[0])"], text=True)
        version = info.strip()
        major, minor = (int(p) for p in version.split(".")[:2])
        runs = [[python, __file__, "--emit"]]
        if (major, minor) >= (3, 11):
            runs.append([python, "-X", "no_debug_ranges", __file__, "--emit"])
        code = []
        for cmd in runs:
            code += json.loads(subprocess.check_output(cmd, text=True))
        out = os.path.join(here, "py%d%d.json" % (major, minor))
        with open(out, "w") as f:
            f.write('{"python": "%s", "format": "%s", "code": [\n' % (version, fmt((major, minor))))
            f.write(",\n".join(json.dumps(c, separators=(",", ":")) for c in code))
            f.write("\n]}\n")
        print("%s: %d code objects -> %s" % (version, len(code), out))


if __name__ == "__main__":
    if sys.argv[1:] == ["--emit"]:
        emit()
    else:
        drive()
