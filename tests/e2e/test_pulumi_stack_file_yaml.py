"""The stack file as the real Pulumi engine reads it: YAML that `nodegate validate` and kubectl
read one way and the engine another.

The engine reads `Pulumi.<stack>.yaml` with timestamps: an unquoted `2024-01-01` (a string to
nodegate's rules reader and to kubectl) reaches the program as Go's time text, '2024-01-01
00:00:00 +0000 UTC'. The program says so, at the key, with the quoted text to write. No cluster:
the stack declares no pool and no reconciler, so `pulumi preview` needs no provider.
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from nodegate.localcluster.pulumi_tools import PulumiTools, ensure_pulumi_built, pulumi_environment
from tests.e2e.support.pulumi_project import REPO, project_venv, run_pulumi

pytestmark = [pytest.mark.pulumi, pytest.mark.timeout(600)]

RULES = """\
  nodegate:rulesInline:
    apiVersion: nodegate.dev/v1
    kind: NodeRules
    labelTaints:
      - name: since
        match: {{labels: {{node-restriction.kubernetes.io/since: {since}}}}}
        taint: {{key: example.com/since, value: x, effect: NoSchedule}}
"""


def _preview(tools: PulumiTools, tmp_path: Path, since: str) -> subprocess.CompletedProcess[str]:
    """`pulumi preview` of a new stack whose file is written by hand, as a user writes it."""
    backend, init = tmp_path / "state", tmp_path / "init"
    backend.mkdir(exist_ok=True)
    init.mkdir(exist_ok=True)
    (init / "Pulumi.yaml").write_bytes((REPO / "Pulumi.yaml").read_bytes())
    env = pulumi_environment(tools, venv=project_venv())
    env.update({"PULUMI_BACKEND_URL": f"file://{backend}", "PULUMI_CONFIG_PASSPHRASE": "e2e"})
    name = f"dates-{len(list(init.glob('Pulumi.*.yaml')))}"

    def pulumi(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return run_pulumi(tools, env, cwd, *args, "--stack", name)

    assert pulumi("stack", "init", cwd=init).returncode == 0
    config = init / f"Pulumi.{name}.yaml"
    config.write_text("config:\n" + RULES.format(since=since), encoding="utf-8")
    return pulumi("preview", "--config-file", str(config), cwd=REPO)


def test_an_unquoted_date_in_the_stack_file_is_refused_with_the_quoted_text_to_write(
    tmp_path: Path,
) -> None:
    tools = ensure_pulumi_built()
    refused = _preview(tools, tmp_path, "2024-01-01")
    assert refused.returncode != 0
    output = refused.stdout + refused.stderr
    assert (
        "nodegate:rulesInline.labelTaints[0].match.labels"
        '["node-restriction.kubernetes.io/since"]: '
        "'2024-01-01 00:00:00 +0000 UTC' is how Pulumi's engine passes an unquoted YAML date or "
        'time in the stack file; to give this value as text, quote it: "2024-01-01"'
    ) in " ".join(output.split()), textwrap.shorten(output, 4000)

    quoted = _preview(tools, tmp_path, '"2024-01-01"')
    assert quoted.returncode == 0, quoted.stdout[-4000:] + quoted.stderr[-4000:]
