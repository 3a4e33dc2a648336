"""The demo checks its own steps with a named error, which `python -O` cannot strip."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys

from nodegate.demo import story


def test_a_failed_check_raises_step_failed_error_even_when_python_strips_asserts() -> None:
    program = (
        "from nodegate.demo.story import StepFailedError, check\n"
        "try:\n    check(False, 'the gate stayed up')\n"
        "except StepFailedError as err:\n    print('failed:', err)\n"
    )
    done = subprocess.run(
        [sys.executable, "-O", "-c", program], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "failed: the gate stayed up"


def test_the_story_checks_its_steps_without_assert() -> None:
    tree = ast.parse(inspect.getsource(story))
    asserts = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Assert)]
    assert asserts == []
