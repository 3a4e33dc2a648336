"""Role nodegate.nodegate.kubelet on this machine (connection local), files under a temp root.

The example playbook examples/ansible/nodes.yml runs a handful of times in one module fixture
(each run costs seconds): flags mode twice, then check mode for another pool, config mode,
and invalid rules. Each test reads one behaviour off those runs. The kubelet restart is
disabled (no kubelet here); its handler still shows whether it was notified.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from nodegate.bootstrap.kubelet_flags import parse_kubelet_flags
from nodegate.core.rules.model import Taint
from tests.ansible.playbooks import ROOT, PlaybookRun, inventory, run_playbook

RULES = ROOT / "examples" / "rules.yaml"
POOL = "gpu"
HANDLER = "Restart kubelet"


@dataclass(frozen=True)
class KubeletRuns:
    """What the role did, run after run, and the files it left."""

    first: PlaybookRun
    second: PlaybookRun
    env_after_second: bytes
    check_other_pool: PlaybookRun
    env_after_check: bytes
    config_mode: PlaybookRun
    env_config_mode: str
    dropin: str
    invalid: PlaybookRun
    invalid_rules: Path
    env_after_invalid: str


def _vars(root: Path, **extra: object) -> dict[str, object]:
    return {
        "nodegate_rules_file": str(RULES),
        "nodegate_kubelet_env_file": str(root / "etc/default/kubelet"),
        "nodegate_kubelet_config_dir": str(root / "etc/kubernetes/kubelet.conf.d"),
        "nodegate_kubelet_restart": False,
        **extra,
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, collections: Path) -> KubeletRuns:
    work = tmp_path_factory.mktemp("kubelet-role")
    root = work / "root"
    (root / "etc/default").mkdir(parents=True)
    env_file = root / "etc/default/kubelet"
    hosts = inventory(work, {"nodegate_nodes": {"nodegate_pool": POOL}})

    def play(*flags: str, **extra: object) -> PlaybookRun:
        return run_playbook(work, collections, "nodes.yml", hosts, _vars(root, **extra), *flags)

    first = play()
    second = play()
    env_after_second = env_file.read_bytes()
    check_other_pool = play("--check", "--diff", nodegate_pool="ci")
    env_after_check = env_file.read_bytes()
    config_mode = play(nodegate_kubelet_mode="config")
    env_config_mode = env_file.read_text(encoding="utf-8")
    dropin = (root / "etc/kubernetes/kubelet.conf.d/50-nodegate.conf").read_text(encoding="utf-8")
    invalid_rules = work / "rules.yaml"
    text = RULES.read_text(encoding="utf-8")
    invalid_rules.write_text(text.replace("effect: NoSchedule}", "effect: NoSchedul}", 1))
    invalid = play(nodegate_rules_file=str(invalid_rules))
    return KubeletRuns(
        first,
        second,
        env_after_second,
        check_other_pool,
        env_after_check,
        config_mode,
        env_config_mode,
        dropin,
        invalid,
        invalid_rules,
        env_file.read_text(encoding="utf-8"),
    )


def _rendered(pool: str) -> tuple[tuple[Taint, ...], dict[str, str]]:
    """What `nodegate render --format kubelet-args` gives for the pool, parsed as kubelet does."""
    args = subprocess.run(
        [sys.executable, "-m", "nodegate.cli", "render", "--rules", str(RULES), "--pool", pool,
         "--format", "kubelet-args"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return parse_kubelet_flags(args)


def _extra_args(env_file: str) -> str:
    """KUBELET_EXTRA_ARGS as the kubelet unit expands it (systemd EnvironmentFile, or sh)."""
    [line] = [x for x in env_file.splitlines() if x.startswith("KUBELET_EXTRA_ARGS=")]
    [value] = shlex.split(line.partition("=")[2])
    return value


def test_the_first_run_writes_the_env_file_and_notifies_the_restart(runs: KubeletRuns) -> None:
    assert runs.first.returncode == 0, runs.first.text()
    assert runs.first.changed == 1
    assert runs.first.task(HANDLER) is not None


def test_the_second_run_changes_nothing_and_restarts_nothing(runs: KubeletRuns) -> None:
    assert runs.second.returncode == 0, runs.second.text()
    assert runs.second.changed == 0
    assert runs.second.task(HANDLER) is None


def test_the_written_flags_parse_back_into_exactly_what_nodegate_render_gives(
    runs: KubeletRuns,
) -> None:
    written = parse_kubelet_flags(_extra_args(runs.env_after_second.decode()))
    assert written == _rendered(POOL)


def test_check_mode_reports_the_change_with_a_diff_and_writes_nothing(
    runs: KubeletRuns,
) -> None:
    run = runs.check_other_pool
    assert run.returncode == 0, run.text()
    assert run.changed == 1
    write = run.task("Write the kubelet environment file")
    assert write is not None
    assert "nodegate.dev/pool=ci" in write["diff"][0]["after"]
    assert runs.env_after_check == runs.env_after_second


def test_config_mode_puts_the_taints_in_a_drop_in_and_the_labels_in_the_flags(
    runs: KubeletRuns,
) -> None:
    assert runs.config_mode.returncode == 0, runs.config_mode.text()
    taints, labels = _rendered(POOL)
    dropin = yaml.safe_load(runs.dropin)  # PyYAML reads YAML 1.1, as kubelet does
    assert dropin["kind"] == "KubeletConfiguration"
    assert [
        Taint.model_construct(key=t["key"], value=t.get("value", ""), effect=t["effect"])
        for t in dropin["registerWithTaints"]
    ] == list(taints)
    args = _extra_args(runs.env_config_mode)
    assert parse_kubelet_flags(args) == ((), labels)
    assert "--config-dir=" in args


def test_invalid_rules_fail_the_play_with_the_validate_lines_and_touch_nothing(
    runs: KubeletRuns,
) -> None:
    assert runs.invalid.returncode != 0
    validate = subprocess.run(
        [sys.executable, "-m", "nodegate.cli", "validate", str(runs.invalid_rules)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    lines = validate.stderr.splitlines()
    assert lines
    assert all(line in runs.invalid.text() for line in lines)
    assert runs.invalid.task("Write the kubelet environment file") is None
    assert runs.env_after_invalid == runs.env_config_mode


def test_a_pool_name_ansible_reads_as_a_boolean_fails_saying_to_quote_it(
    tmp_path: Path, collections: Path
) -> None:
    # A pool named `on` is a string in the rules (YAML 1.2) and True in an inventory (YAML 1.1):
    # the play said "no pool named 'True'; the pools are: on".
    root = tmp_path / "root"
    (root / "etc/default").mkdir(parents=True)
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "apiVersion: nodegate.dev/v1\nkind: NodeRules\n"
        "nodePools:\n  - {name: on, provider: oke, size: 1}\n",
        encoding="utf-8",
    )
    hosts = tmp_path / "inventory.yml"
    hosts.write_text(
        textwrap.dedent(
            f"""\
            all:
              children:
                nodegate_nodes:
                  hosts:
                    localhost:
                      ansible_connection: local
                      ansible_python_interpreter: {sys.executable}
                      ansible_become: false
                  vars:
                    nodegate_pool: on
            """
        ),
        encoding="utf-8",
    )
    run = run_playbook(
        tmp_path, collections, "nodes.yml", hosts, _vars(root, nodegate_rules_file=str(rules))
    )
    assert run.returncode != 0
    assert (
        f"{rules}: the pool is given as True, not a pool name: Ansible reads YAML 1.1, where an "
        "unquoted yes/no/on/off/y/n is a boolean and 010 the number 8; quote the pool name "
        'where it is set (nodegate_pool: "on")'
    ) in run.text()
    assert not (root / "etc/default/kubelet").exists()
