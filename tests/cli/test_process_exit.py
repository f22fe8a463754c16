"""The console script ends without the interpreter's teardown, but only after what a normal exit does first."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

_SCRIPT = textwrap.dedent("""
    import atexit, sys, threading, time
    from advisor_core.cli.process_exit import arm, exit_after_handlers

    class Noisy:
        def __del__(self):  # runs only when the interpreter tears its modules down
            sys.stderr.write("teardown\\n")

    kept = Noisy()
    arm()
    atexit.register(lambda: sys.stdout.write("handler registered later ran\\n"))
    threading.Thread(target=lambda: (time.sleep(0.2), sys.stdout.write("thread joined\\n"))).start()
    sys.stdout.write("buffered, no newline")
    exit_after_handlers({code})
""")


def _run(code: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _SCRIPT.format(code=code)], capture_output=True, text=True,
                          timeout=60)


def test_exit_code_threads_handlers_and_buffers_kept_teardown_skipped():
    proc = _run(3)
    assert proc.returncode == 3
    assert proc.stdout == "buffered, no newlinethread joined\nhandler registered later ran\n"
    assert "teardown" not in proc.stderr


def test_zero_exit():
    assert _run(0).returncode == 0


def test_main_in_process_does_not_end_the_process():
    from advisor_core.cli import main

    assert main(["rules", "--format", "json"]) == 0  # a test, or an embedding program, goes on


def test_module_entry_point_flushes_a_long_stdout_before_it_ends():
    proc = subprocess.run([sys.executable, "-m", "advisor_core", "rules", "--format", "json"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0
    rules = json.loads(proc.stdout)  # the whole document reached the pipe
    assert {"MD001", "CT001", "CT002", "AL001", "CM001", "RC001"} <= {r["code"] for r in rules}


def test_the_advisor_process_collects_garbage_rarely_and_in_process_callers_keep_their_thresholds():
    probe = textwrap.dedent("""
        import gc, runpy, sys
        sys.argv = ["advisor", "rules", "--format", "json"]
        before = gc.get_threshold()
        try:
            runpy.run_module("advisor_core", run_name="__main__")
        except SystemExit:
            pass
        sys.stderr.write(f"{before} {gc.get_threshold()}")
    """)
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0
    assert proc.stderr.strip() == "(700, 10, 10) (200000, 30, 30)"
    import gc

    from advisor_core.cli import main

    before = gc.get_threshold()
    main(["rules", "--format", "json"])
    assert gc.get_threshold() == before
