"""The sandbox runs real child processes: correct code passes, wrong code fails, and hostile code is contained
(scored as failed, within seconds, leaving nothing behind and the test process unharmed)."""
from __future__ import annotations

import os
import secrets
import time

import pytest

from rlscale.tasks.sandbox import Limits, run_python

HOSTILE_SECONDS = 8  # the default limits: 2 CPU seconds, 5 wall-clock seconds


def test_correct_code_passes_and_prints():
    result = run_python("def f(x):\n    return x + 3\nassert f(4) == 7\nprint('fine')")
    assert (result.passed, result.reason, result.returncode, result.stdout) == (True, "ok", 0, "fine\n")


def test_wrong_answers_fail():
    result = run_python("def f(x):\n    return x + 2\nassert f(4) == 7")
    assert (result.passed, result.reason) == (False, "error")
    assert "AssertionError" in result.stderr


def test_writes_inside_its_own_folder_are_allowed_and_removed():
    result = run_python("import os\nopen('note.txt', 'w').write('x')\nprint(os.getcwd())")
    assert result.passed
    assert not os.path.exists(result.stdout.strip())


@pytest.mark.parametrize("source, reasons", [
    ("import os\nwhile True: os.fork()", {"blocked"}),
    ("while True: pass", {"timeout"}),
    ("import time\ntime.sleep(60)", {"timeout"}),
    ("x = 'a' * 10**10", {"memory"}),
    ("print('x' * 10**9)", {"memory", "output too large"}),
    ("while True: print('x' * 10000)", {"output too large"}),
    ("open('big', 'w').write('x' * 10**7)", {"file too large"}),
    ("import subprocess; subprocess.run(['ls'])", {"blocked"}),
    ("import socket; socket.create_connection(('1.1.1.1', 80))", {"blocked"}),
    ("import os; os.system('echo hi')", {"blocked"}),
    ("import os; os.execv('/bin/sh', ['sh', '-c', 'echo hi'])", {"blocked"}),
    ("import ctypes; ctypes.CDLL(None)", {"blocked"}),
    ("import resource; resource.setrlimit(resource.RLIMIT_CPU, (100, 100))", {"blocked"}),
], ids=["fork_bomb", "infinite_loop", "sleep", "memory_hog", "huge_print", "endless_output", "huge_file",
        "subprocess", "socket", "os_system", "exec", "ctypes", "raise_limits"])
def test_hostile_code_is_contained(source, reasons):
    start = time.monotonic()
    result = run_python(source)
    assert time.monotonic() - start < HOSTILE_SECONDS
    assert not result.passed
    assert result.reason in reasons, (result.reason, result.stderr[-500:])


def test_write_outside_its_folder_is_blocked(tmp_path):
    target = f"/tmp/evil_{secrets.token_hex(8)}"
    result = run_python(f"open({target!r}, 'w').write('x')")
    assert (result.passed, result.reason) == (False, "blocked")
    assert not os.path.exists(target)


def test_deleting_a_home_folder_is_blocked(tmp_path):
    # The child deletes a home folder of the test's own (HOME points into tmp_path), so a failure of the
    # sandbox could only remove this canary.
    home = tmp_path / "home"
    (home / "canary").mkdir(parents=True)
    source = (f"import os, shutil\nos.environ['HOME'] = {str(home)!r}\n"
              "shutil.rmtree(os.path.expanduser('~'))")
    result = run_python(source)
    assert (result.passed, result.reason) == (False, "blocked")
    assert (home / "canary").is_dir()


def test_an_early_exit_with_status_0_passes_but_states_nothing():
    result = run_python("import sys\nsys.exit(0)\nprint('never')")
    assert (result.passed, result.stdout) == (True, "")


def test_a_bad_limit_is_one_line_naming_it():
    with pytest.raises(ValueError, match=r"^sandbox limit wall_s=0: must be positive$"):
        Limits(wall_s=0)
