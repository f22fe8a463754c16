"""Ending the ``advisor`` process without the interpreter's teardown.

A normal exit frees every object the run made, module by module (the op view's
frames, the parsers' caches, pandas and Arrow themselves): about 0.1 s after a
1 M-row analysis, on a process whose output is already written. Like any exit, this
one first joins the process's non-daemon threads and runs every ``atexit`` handler
(multiprocessing's, Dask's, logging's), then flushes stdout and stderr; it only skips
freeing memory the operating system takes back anyway.

Used by the console script and ``python -m advisor_core`` only, never by an in-process
``main()`` (tests, an embedding program).
"""

from __future__ import annotations

import atexit
import os
import sys
from typing import NoReturn

_code: int | None = None


def exit_after_handlers(code: int) -> NoReturn:
    """Exit with ``code``: threads joined and ``atexit`` handlers run as usual, then no teardown.

    Call it before any library has registered an ``atexit`` handler (the CLI's imports
    register none), so that ``_end`` is the first registered and therefore runs last.
    """
    global _code
    _code = code
    raise SystemExit(code)


def arm() -> None:
    """Register the handler that ends the process (see :func:`exit_after_handlers`); once per process.

    Not under ``coverage`` measuring subprocesses: its handler, registered at start-up, would run after this one.
    """
    if not getattr(arm, "done", False) and "COVERAGE_PROCESS_START" not in os.environ:
        atexit.register(_end)
        arm.done = True  # type: ignore[attr-defined]


def _end() -> None:
    if _code is None:  # the process is ending some other way (an uncaught exception): the normal teardown
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`| head`) or stream: nothing more can reach it
            pass
    os._exit(_code)
