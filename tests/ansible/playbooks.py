"""Running the collection as a user does: built, installed, and driven by `ansible-playbook`.

`install_collection` builds the collection tarball from ansible/nodegate and installs it with
`ansible-galaxy` (offline: its one dependency, kubernetes.core, comes with the `ansible` package
from PyPI). `run_playbook` runs one of examples/ansible/'s playbooks in a subprocess with the
JSON callback, so a test reads what each task did instead of scraping Ansible's screen output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
COLLECTION_SOURCE = ROOT / "ansible" / "nodegate"
EXAMPLES = ROOT / "examples" / "ansible"
BIN = Path(sys.executable).parent
RUN_TIMEOUT_SECONDS = 120


def tool(name: str) -> str:
    """An Ansible command of this venv (the `.[ansible]` extra), with the fix if it is missing."""
    path = BIN / name
    if not path.exists():
        raise RuntimeError(
            f"{path} is missing: install the Ansible extra (pip install -e '.[ansible]'; "
            "make test does)"
        )
    return str(path)


def install_collection(workdir: Path) -> Path:
    """Build the tarball and install it; the collections path to give ansible-playbook."""
    built = workdir / "dist"
    installed = workdir / "collections"
    env = _environment(workdir, installed)
    subprocess.run(
        [
            tool("ansible-galaxy"),
            "collection",
            "build",
            str(COLLECTION_SOURCE),
            "--output-path",
            str(built),
        ],
        check=True,
        capture_output=True,
        env=env,
        timeout=RUN_TIMEOUT_SECONDS,
    )
    [tarball] = built.glob("nodegate-nodegate-*.tar.gz")
    subprocess.run(
        [tool("ansible-galaxy"), "collection", "install", str(tarball), "-p", str(installed)],
        check=True,
        capture_output=True,
        env=env,
        timeout=RUN_TIMEOUT_SECONDS,
    )
    return installed


def _environment(workdir: Path, collections: Path) -> dict[str, str]:
    return {
        **os.environ,
        "ANSIBLE_COLLECTIONS_PATH": str(collections),
        "ANSIBLE_HOME": str(workdir / "ansible-home"),  # nothing written under ~/.ansible
        "ANSIBLE_LOCAL_TEMP": str(workdir / "ansible-tmp"),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
    }


@dataclass(frozen=True)
class PlaybookRun:
    """One `ansible-playbook` run: its exit code, the JSON callback's report, stderr."""

    returncode: int
    report: dict[str, Any]
    stderr: str

    @property
    def changed(self) -> int:
        """How many tasks changed something on the one host."""
        [stats] = self.report["stats"].values()
        return int(stats["changed"])

    def task(self, name: str) -> dict[str, Any] | None:
        """The one host's result of the task whose name ends with `name`, if it ran."""
        for play in self.report["plays"]:
            for task in play["tasks"]:
                if task["task"]["name"].endswith(name):
                    [result] = task["hosts"].values()
                    return dict(result)
        return None

    def text(self) -> str:
        """Every message the run gave (each host result's `msg`, then stderr), as written."""
        messages = [
            str(result["msg"])
            for play in self.report["plays"]
            for task in play["tasks"]
            for result in task["hosts"].values()
            if "msg" in result
        ]
        return "\n".join([*messages, self.stderr])


def inventory(workdir: Path, groups: dict[str, dict[str, Any]]) -> Path:
    """An inventory with localhost (connection local, this Python) in the given groups."""
    host = {
        "localhost": {
            "ansible_connection": "local",
            "ansible_python_interpreter": sys.executable,
            "ansible_become": False,
        }
    }
    data = {"all": {"children": {g: {"hosts": host, "vars": v} for g, v in groups.items()}}}
    path = workdir / "inventory.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def run_playbook(
    workdir: Path,
    collections: Path,
    playbook: str,
    inventory_file: Path,
    extra_vars: dict[str, Any],
    *flags: str,
) -> PlaybookRun:
    """Run examples/ansible/`playbook` with `extra_vars` (highest precedence) and `flags`."""
    completed = subprocess.run(
        [
            tool("ansible-playbook"),
            "-i",
            str(inventory_file),
            str(EXAMPLES / playbook),
            "-e",
            json.dumps(extra_vars),
            *flags,
        ],
        capture_output=True,
        text=True,
        env=_environment(workdir, collections),
        timeout=RUN_TIMEOUT_SECONDS,
        check=False,
    )
    try:
        report: dict[str, Any] = json.loads(completed.stdout)
    except json.JSONDecodeError as err:
        raise AssertionError(
            f"ansible-playbook printed no JSON report (exit {completed.returncode}):\n"
            f"{completed.stdout}\n{completed.stderr}"
        ) from err
    return PlaybookRun(completed.returncode, report, completed.stderr)
