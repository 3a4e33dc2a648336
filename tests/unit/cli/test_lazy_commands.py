"""Each command is imported when it runs: `nodegate --help`, a TAB and `validate` load neither the
Kubernetes client nor the reconciler (an import guard, not a timing: `make bench-cli` times
them), while `--help` still lists every command and each command's own help shows its options."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer import _click as click
from typer.testing import CliRunner

from nodegate.cli.lazy_group import LazyCommand, LazyGroup
from nodegate.cli.main import COMMANDS, app
from tests.unit.cli.test_validate_deadlocks import RULES as WAITING_RULES

ROOT = Path(__file__).resolve().parents[3]
RULES = "examples/rules.yaml"
NODE = "examples/nodes/gpu-node.yaml"
runner = CliRunner()

HEAVY = ("kubernetes", "nodegate.reconciler", "cryptography", "jinja2", "pulumi")
"""What only a command that needs them may load: the Kubernetes client, the reconciler (with the
webhook's cryptography), the templates' jinja2 and the Pulumi SDK."""
CLUSTER = ("kubernetes", "nodegate.reconciler", "cryptography", "pulumi")
"""What an offline command never needs (`render` renders templates with jinja2)."""
TYPED = ("pydantic", "ruamel", "nodegate.core")
"""What only reading or checking rules needs: pydantic and the rules model (typer's own
coercion builds on pydantic too, for a value given: `cli/lazy_coercion.py`), the YAML reader."""
AGENT_DECISIONS = ("nodegate.core.decisions.agent_deadlocks", "nodegate.core.decisions.node_agents")
"""What `validate` needs only for rules that can wait for each other, or with --daemon-sets."""

_PROGRAM = """
import json, sys
from nodegate.cli.main import app
try:
    app(sys.argv[1:], prog_name="nodegate")
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.__stderr__)
"""


def loaded_by(args: list[str], env: dict[str, str] | None = None) -> set[str]:
    """The modules a fresh `nodegate ARGS` process has imported when it exits."""
    done = subprocess.run(
        [sys.executable, "-c", _PROGRAM, *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    modules: list[str] = json.loads(done.stderr.strip().splitlines()[-1])
    return set(modules)


def among(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(
        m for m in modules if m in packages or m.startswith(tuple(f"{p}." for p in packages))
    )


def tab(*words: str) -> dict[str, str]:
    """bash's completion request for `nodegate WORDS<TAB>`."""
    line = ["nodegate", *words]
    return {
        "_NODEGATE_COMPLETE": "complete_bash",
        "COMP_WORDS": " ".join(line),
        "COMP_CWORD": str(len(line) - 1),
    }


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--help"], None),
        (["-h"], None),
        (["--version"], None),
        ([], tab("")),
        ([], tab("validate", "--")),
        (["validate", RULES], None),
    ],
    ids=["help", "h", "version", "tab-commands", "tab-validate-options", "validate"],
)
def test_help_a_tab_and_validate_load_no_cluster_client_reconciler_or_templates(
    args: list[str], env: dict[str, str] | None
) -> None:
    assert among(loaded_by(args, env), HEAVY) == []


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--help"], None),
        (["--version"], None),
        ([], tab("")),
        ([], tab("validate", "--")),
        ([], tab("validate", "--daemon-sets", "")),
        ([], tab("render", "--")),
        ([], tab("render", "--rules", RULES, "--format", "")),
        ([], tab("schema", "--")),
    ],
    ids=[
        "help",
        "version",
        "tab-commands",
        "tab-validate-options",
        "tab-validate-option-value",
        "tab-render-options",
        "tab-render-format",
        "tab-schema-options",
    ],
)
def test_help_and_a_tab_load_neither_pydantic_nor_the_rules(
    args: list[str], env: dict[str, str] | None
) -> None:
    # A TAB on a command's options imports the command's module to read them: the module
    # imports what the command runs on when it runs, and a TAB converts no value
    # (cli/lazy_coercion.py). Every command is held to this below, but reconcile (issue 61).
    assert among(loaded_by(args, env), TYPED) == []


STILL_IMPORT_THEIR_WORK = {
    "reconcile",
}
"""Commands whose options cannot be read without what the command runs on (issue 61):
reconcile's options, one per field of its settings model (`ReconcilerSettings`, pydantic), are
derived from the model by `nodegate.core.text.flags`, names, defaults and help alike, so a TAB
on them or its --help builds the model
(`test_reconcile_help_loads_the_settings_but_not_the_reconciler_itself`)."""


@pytest.mark.parametrize("asked", ["tab", "help"])
@pytest.mark.parametrize("lazy", COMMANDS, ids=[c.name for c in COMMANDS])
def test_a_tab_on_a_commands_options_or_its_help_loads_its_work_only_where_still_listed(
    lazy: LazyCommand, asked: str
) -> None:
    # Listed and now light: take it off the list, so that it stays light. Its work: the rules
    # (TYPED) or a cluster, the reconciler, the templates (HEAVY).
    args, env = ([], tab(lazy.name, "--")) if asked == "tab" else ([lazy.name, "--help"], None)

    loads_its_work = among(loaded_by(args, env), TYPED + HEAVY) != []

    assert loads_its_work == (lazy.name in STILL_IMPORT_THEIR_WORK)


def test_validate_loads_the_agent_decisions_only_for_rules_that_may_wait_on_each_other(
    tmp_path: Path,
) -> None:
    # examples/rules.yaml has one startup gate and no node-agent rule: nothing can wait on it.
    assert among(loaded_by(["validate", RULES]), AGENT_DECISIONS) == []
    # A gate and an agent rule that wait for pods: the check runs (its warning is in
    # tests/unit/cli/test_validate_deadlocks.py).
    rules = tmp_path / "rules.yaml"
    rules.write_text(WAITING_RULES)

    assert among(loaded_by(["validate", str(rules)]), AGENT_DECISIONS) == list(AGENT_DECISIONS)


@pytest.mark.parametrize(
    "args",
    [
        ["render", "--rules", RULES, "--pool", "gpu"],
        ["explain", "--node", NODE, "--rules", RULES],
        ["schema"],
    ],
    ids=["render", "explain-node", "schema"],
)
def test_offline_commands_load_neither_the_kubernetes_client_nor_the_reconciler(
    args: list[str],
) -> None:
    assert among(loaded_by(args), CLUSTER) == []


def test_validate_builds_no_deploy_settings_model() -> None:
    # It says which gates the Deployment tolerates (manifests.tolerations), from the rules alone.
    assert "nodegate.manifests.settings" not in loaded_by(["validate", RULES])


def test_help_imports_no_command_module() -> None:
    modules = loaded_by(["--help"])

    assert [m for m in modules if m.startswith("nodegate.cli.") and m.endswith("_cmd")] == []


def test_reconcile_help_loads_the_settings_but_not_the_reconciler_itself() -> None:
    modules = loaded_by(["reconcile", "--help"])

    assert "nodegate.reconciler.settings" in modules
    assert among(modules, ("kubernetes", "nodegate.reconciler.main", "cryptography")) == []


def _group() -> LazyGroup:
    group = typer.main.get_command(app)
    assert isinstance(group, LazyGroup)
    return group


@pytest.mark.parametrize("lazy", COMMANDS, ids=[c.name for c in COMMANDS])
def test_each_table_line_is_the_first_sentence_of_its_commands_help(lazy: LazyCommand) -> None:
    # The table is what `--help` and a TAB show without importing; the command is the truth
    # (and its module is where the table says).
    command = lazy.load()

    assert command.get_short_help_str(limit=10_000) == lazy.short_help


def test_help_lists_every_command_with_its_line_from_the_table() -> None:
    result = runner.invoke(app, ["--help"])

    listed = result.stdout.split("Commands:\n", 1)[1]
    assert listed.split() == " ".join(f"{c.name} {c.short_help}" for c in COMMANDS).split()


@pytest.mark.parametrize(
    ("command", "option"),
    [
        (["render"], "--pool"),
        (["validate"], "--daemon-sets"),
        (["reconcile"], "--rules-configmap"),
        (["labels", "hand-over"], "--to"),
        (["migrate", "tainter"], "--help"),
    ],
    ids=["render", "validate", "reconcile", "labels-hand-over", "migrate-tainter"],
)
def test_each_commands_own_help_shows_its_options(command: list[str], option: str) -> None:
    result = runner.invoke(app, [*command, "--help"])

    assert result.exit_code == 0, result.output
    assert f"Usage: nodegate {' '.join(command)} [OPTIONS]" in result.stdout
    assert option in result.stdout


def test_a_tab_offers_every_command_with_its_line() -> None:
    group = _group()
    ctx = click.Context(group, info_name="nodegate")

    offered = [(item.value, item.help) for item in group.shell_complete(ctx, "")]

    assert offered == [(c.name, c.short_help) for c in COMMANDS]


def test_a_tab_on_a_prefix_offers_the_commands_it_begins() -> None:
    group = _group()
    ctx = click.Context(group, info_name="nodegate")

    assert [item.value for item in group.shell_complete(ctx, "re")] == ["render", "reconcile"]


def test_a_mistyped_command_is_told_the_nearest_one_though_none_was_imported() -> None:
    result = runner.invoke(app, ["valdate", RULES])

    assert result.exit_code == 2
    assert "No such command 'valdate'. Did you mean 'validate'?" in result.output
