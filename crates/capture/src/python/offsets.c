/*
 * The CPython structure offsets that layout.rs's tables hold, printed as
 * Rust for the Python whose headers it is compiled against (3.9 to 3.14,
 * the default GIL build, x86-64). Rerun, for each version:
 *
 *   I=/root/.pyenv/versions/3.12.1/include/python3.12
 *   gcc -o /tmp/offsets offsets.c -I$I -I$I/internal && /tmp/offsets
 *
 * and for a Debian-packaged one, whose pyconfig.h is in an arch dir that
 * the wrapper pyconfig.h finds through -I$R/usr/include. 3.14 came so,
 * from sid, without touching the host's apt configuration:
 *
 *   mkdir -p /tmp/apt/lists/partial /tmp/apt/cache/archives/partial /tmp/apt/parts
 *   echo 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian sid main' \
 *       > /tmp/apt/sources.list
 *   O="-o Dir::Etc::SourceList=/tmp/apt/sources.list -o Dir::Etc::SourceParts=/tmp/apt/parts
 *      -o Dir::State::Lists=/tmp/apt/lists -o Dir::Cache=/tmp/apt/cache"
 *   apt-get $O update && apt-get $O download libpython3.14-dev
 *   R=/tmp/apt/root; dpkg-deb -x libpython3.14-dev_*.deb $R
 *   gcc -o /tmp/offsets offsets.c -I$R/usr/include/python3.14 \
 *       -I$R/usr/include/python3.14/internal -I$R/usr/include && /tmp/offsets
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#if PY_VERSION_HEX < 0x03090000
#error "3.9 or later"
#endif
#if PY_VERSION_HEX < 0x030B0000
#include <frameobject.h>
#endif
#include "pycore_runtime.h"
#include "pycore_interp.h"
#if PY_VERSION_HEX >= 0x030B0000
#include "pycore_frame.h"
#endif
#if PY_VERSION_HEX >= 0x030E0000
#include "pycore_interpframe_structs.h"
#endif

#define O(s, f) ((unsigned long)offsetof(s, f))

/* The bit position of the lowest set bit of a mask. */
static int low_bit(unsigned int m)
{
	for (int i = 0; i < 32; i++)
		if (m & (1u << i))
			return i;
	return -1;
}

/* The state word (the first 4 bytes of PyASCIIObject.state) with one
 * bitfield set to all ones: which bits it takes. */
#define STATE_MASK(field, ones)                                              \
	({                                                                   \
		PyASCIIObject a;                                             \
		unsigned int w;                                              \
		memset(&a, 0, sizeof(a));                                    \
		a.state.field = ones;                                        \
		memcpy(&w, (char *)&a + offsetof(PyASCIIObject, state), 4); \
		w;                                                           \
	})

int main(void)
{
	int minor = (PY_VERSION_HEX >> 16) & 0xff;

	printf("/// From offsets.c against the %s headers.\n", PY_VERSION);
	printf("const PY3%d: Offsets = Offsets {\n", minor);
	printf("    rt_interp: %lu,\n", O(_PyRuntimeState, interpreters.head));
#if PY_VERSION_HEX >= 0x030B0000
	printf("    is_threads: %lu,\n", O(PyInterpreterState, threads.head));
	printf("    ts_tid: %lu,\n", O(PyThreadState, native_thread_id));
#else
	printf("    is_threads: %lu,\n", O(PyInterpreterState, tstate_head));
	printf("    ts_tid: %lu,\n", O(PyThreadState, thread_id));
#endif
	printf("    ts_next: %lu,\n", O(PyThreadState, next));
#if PY_VERSION_HEX >= 0x030D0000
	printf("    ts_frame: %lu,\n", O(PyThreadState, current_frame));
	printf("    cf_current: 0,\n");
#elif PY_VERSION_HEX >= 0x030B0000
	printf("    ts_frame: %lu,\n", O(PyThreadState, cframe));
	printf("    cf_current: %lu,\n", O(_PyCFrame, current_frame));
#else
	printf("    ts_frame: %lu,\n", O(PyThreadState, frame));
	printf("    cf_current: 0,\n");
#endif
#if PY_VERSION_HEX >= 0x030D0000
	printf("    f_back: %lu,\n", O(_PyInterpreterFrame, previous));
	printf("    f_code: %lu,\n", O(_PyInterpreterFrame, f_executable));
	printf("    f_instr: %lu,\n", O(_PyInterpreterFrame, instr_ptr));
	printf("    f_owner: %lu,\n", O(_PyInterpreterFrame, owner));
	printf("    f_globals: %lu,\n", O(_PyInterpreterFrame, f_globals));
#elif PY_VERSION_HEX >= 0x030B0000
	printf("    f_back: %lu,\n", O(_PyInterpreterFrame, previous));
	printf("    f_code: %lu,\n", O(_PyInterpreterFrame, f_code));
	printf("    f_instr: %lu,\n", O(_PyInterpreterFrame, prev_instr));
	printf("    f_owner: %lu,\n", O(_PyInterpreterFrame, owner));
	printf("    f_globals: %lu,\n", O(_PyInterpreterFrame, f_globals));
#else
	printf("    f_back: %lu,\n", O(PyFrameObject, f_back));
	printf("    f_code: %lu,\n", O(PyFrameObject, f_code));
	printf("    f_instr: %lu,\n", O(PyFrameObject, f_lasti));
	printf("    f_owner: NO_OWNER,\n");
	printf("    f_globals: %lu,\n", O(PyFrameObject, f_globals));
#endif
#if PY_VERSION_HEX >= 0x030B0000
	printf("    co_name: %lu,\n", O(PyCodeObject, co_qualname));
	printf("    co_lines: %lu,\n", O(PyCodeObject, co_linetable));
	printf("    co_code_adaptive: %lu,\n", O(PyCodeObject, co_code_adaptive));
#elif PY_VERSION_HEX >= 0x030A0000
	printf("    co_name: %lu,\n", O(PyCodeObject, co_name));
	printf("    co_lines: %lu,\n", O(PyCodeObject, co_linetable));
	printf("    co_code_adaptive: %lu,\n", O(PyBytesObject, ob_sval));
#else
	printf("    co_name: %lu,\n", O(PyCodeObject, co_name));
	printf("    co_lines: %lu,\n", O(PyCodeObject, co_lnotab));
	printf("    co_code_adaptive: %lu,\n", O(PyBytesObject, ob_sval));
#endif
	printf("    co_file: %lu,\n", O(PyCodeObject, co_filename));
	printf("    co_first: %lu,\n", O(PyCodeObject, co_firstlineno));
	printf("    u_state: %lu,\n", O(PyASCIIObject, state));
	printf("    u_length: %lu,\n", O(PyASCIIObject, length));
	printf("    u_ascii_size: %lu,\n", (unsigned long)sizeof(PyASCIIObject));
	printf("    u_compact_size: %lu,\n", (unsigned long)sizeof(PyCompactUnicodeObject));
	printf("    u_kind_shift: %d,\n", low_bit(STATE_MASK(kind, 7)));
	printf("    u_compact_bit: %d,\n", low_bit(STATE_MASK(compact, 1)));
	printf("    u_ascii_bit: %d,\n", low_bit(STATE_MASK(ascii, 1)));
	printf("    b_size: %lu,\n", O(PyVarObject, ob_size));
	printf("    b_data: %lu,\n", O(PyBytesObject, ob_sval));
	/* The main interpreter's GIL, whose cond and mutex its waiters sleep on. */
#if PY_VERSION_HEX >= 0x030C0000
	printf("    gil_off: %lu,\n", O(_PyRuntimeState, _main_interpreter) + O(PyInterpreterState, _gil));
#else
	printf("    gil_off: %lu,\n", O(_PyRuntimeState, ceval.gil));
#endif
	printf("    gil_size: %lu,\n", (unsigned long)sizeof(struct _gil_runtime_state));
	printf("};\n");

#if PY_VERSION_HEX >= 0x030D0000
	/* Where each value layout.rs reads sits inside _Py_DebugOffsets. */
	printf("/// Inside `_Py_DebugOffsets` (%lu bytes, at _PyRuntime + %lu), from offsets.c against %s.\n",
	       (unsigned long)sizeof(_Py_DebugOffsets), O(_PyRuntimeState, debug_offsets), PY_VERSION);
	printf("const DEBUG3%d: DebugPos = DebugPos {\n", minor);
	printf("    free_threaded: %lu,\n", O(_Py_DebugOffsets, free_threaded));
	printf("    rt_interp: %lu,\n", O(_Py_DebugOffsets, runtime_state.interpreters_head));
	printf("    is_threads: %lu,\n", O(_Py_DebugOffsets, interpreter_state.threads_head));
	printf("    ts_next: %lu,\n", O(_Py_DebugOffsets, thread_state.next));
	printf("    ts_tid: %lu,\n", O(_Py_DebugOffsets, thread_state.native_thread_id));
	printf("    ts_frame: %lu,\n", O(_Py_DebugOffsets, thread_state.current_frame));
	printf("    f_back: %lu,\n", O(_Py_DebugOffsets, interpreter_frame.previous));
	printf("    f_code: %lu,\n", O(_Py_DebugOffsets, interpreter_frame.executable));
	printf("    f_instr: %lu,\n", O(_Py_DebugOffsets, interpreter_frame.instr_ptr));
	printf("    f_owner: %lu,\n", O(_Py_DebugOffsets, interpreter_frame.owner));
	printf("    co_name: %lu,\n", O(_Py_DebugOffsets, code_object.qualname));
	printf("    co_file: %lu,\n", O(_Py_DebugOffsets, code_object.filename));
	printf("    co_lines: %lu,\n", O(_Py_DebugOffsets, code_object.linetable));
	printf("    co_first: %lu,\n", O(_Py_DebugOffsets, code_object.firstlineno));
	printf("    co_code_adaptive: %lu,\n", O(_Py_DebugOffsets, code_object.co_code_adaptive));
	printf("    u_state: %lu,\n", O(_Py_DebugOffsets, unicode_object.state));
	printf("    u_length: %lu,\n", O(_Py_DebugOffsets, unicode_object.length));
	printf("    u_ascii_size: %lu,\n", O(_Py_DebugOffsets, unicode_object.asciiobject_size));
	printf("    b_size: %lu,\n", O(_Py_DebugOffsets, bytes_object.ob_size));
	printf("    b_data: %lu,\n", O(_Py_DebugOffsets, bytes_object.ob_sval));
	printf("};\n");
#endif
	return 0;
}
