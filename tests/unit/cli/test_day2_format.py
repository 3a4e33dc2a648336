"""Output that reads well at 80 columns and at 160: no line past the width, no flag, taint or
node name split, and colour only on a terminal."""

from __future__ import annotations

import re
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from nodegate.cli.help_format import wrap
from nodegate.cli.live.render import Column, print_table
from nodegate.cli.main import app
from nodegate.cli.plan_cmd import print_plan
from nodegate.cli.status_cmd import print_status
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.objects.status_record import HeldUpdate, ReconcilerStatus
from nodegate.core.reports.cluster_status import (
    EventView,
    LeaseView,
    RecordsView,
    RulesSourceView,
    status_report,
)
from nodegate.core.reports.rules_change import rules_change
from nodegate.core.rules.node import NodeTaint
from tests.unit.core.builders import NOW, node, rules

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "examples" / "rules.yaml"
NODE = ROOT / "examples" / "nodes" / "gpu-node.yaml"
WIDTHS = [80, 160]
LONG_TAINT = "startup.nodegate.example.com/initializing-the-gpu-driver=wait:NoSchedule"
runner = CliRunner()


def console(width: int, terminal: bool = False) -> tuple[Console, StringIO]:
    out = StringIO()
    if terminal:
        return Console(file=out, width=width, force_terminal=True, color_system="standard"), out
    return Console(file=out, width=width), out


def fits(text: str, width: int) -> bool:
    return all(len(line) <= width for line in text.splitlines())


def command_names() -> list[str]:
    return ["validate", "schema", "explain", "status", "plan", "render", "demo", "reconcile"]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("command", command_names())
def test_help_fits_the_width_and_never_cuts_a_flag(command: str, width: int) -> None:
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    assert fits(result.stdout, width), result.stdout
    flags = re.findall(r"--[a-z][a-z-]+", result.stdout)
    assert "--help" in flags
    assert not any(flag.endswith("-") for flag in flags), flags  # no `--rules-poll-` + newline
    assert "…" not in result.stdout


@pytest.mark.parametrize("width", WIDTHS)
def test_the_command_list_shows_each_commands_whole_first_sentence(width: int) -> None:
    result = runner.invoke(app, ["--help"], env={"COLUMNS": str(width)})
    assert fits(result.stdout, width)
    text = " ".join(result.stdout.split())
    assert "Check rules files; print every problem as FILE:LINE:COL: path: message." in text
    commands = result.stdout.split("Commands:", 1)[1]
    assert not any(line.endswith("...") for line in commands.splitlines())


def test_a_help_default_with_a_hyphen_is_not_split_at_it() -> None:
    result = runner.invoke(app, ["reconcile", "--help"], env={"COLUMNS": "80"})
    assert "no-dry-run]" in result.stdout


@pytest.mark.parametrize("width", WIDTHS)
def test_explain_at_each_width_keeps_every_taint_whole(width: int) -> None:
    args = ["explain", "--rules", str(RULES), "--node", str(NODE), "--now", "2026-11-21T10:10:00Z"]
    result = runner.invoke(app, args, env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    assert fits(result.stdout, width), result.stdout
    taints = (
        "nvidia.com/gpu=present:NoSchedule",
        "node.kubernetes.io/not-ready:NoSchedule",
        "nvidia.com/gpu:NoSchedule,",  # in the ownership annotation's list
        "startup-taint.cluster-autoscaler.kubernetes.io/initializing=wait:NoSchedule",
    )
    for taint in taints:
        assert taint in result.stdout


def test_a_table_too_wide_for_80_columns_becomes_one_block_per_row() -> None:
    rows = [("gpu-node-0001", LONG_TAINT, "a reason that wraps at spaces " * 3)]
    columns = (Column("node"), Column("taint"), Column("why", wrap=True))
    narrow, narrow_out = console(80)
    wide, wide_out = console(160)
    print_table(narrow, columns, rows)
    print_table(wide, columns, rows)
    assert f"  taint:\n    {LONG_TAINT}\n" in narrow_out.getvalue()
    assert "  node" not in narrow_out.getvalue()  # no table header
    assert fits(narrow_out.getvalue(), 80)
    assert "node " in wide_out.getvalue().splitlines()[0]  # the header row of a table
    assert LONG_TAINT in wide_out.getvalue() and fits(wide_out.getvalue(), 160)


def test_colour_only_on_a_terminal() -> None:
    piped, piped_out = console(80)
    tty, tty_out = console(80, terminal=True)
    for target in (piped, tty):
        print_table(target, (Column("rule"),), [("team",)], title="rules")
    assert "\x1b[" not in piped_out.getvalue()
    assert "\x1b[" in tty_out.getvalue()


def a_status_report() -> object:
    gate_rules = rules(
        """\
        labelTaints:
          - name: team
            match: {labels: {example.com/team: a}}
            taint: {key: example.com/team, value: a, effect: NoSchedule}
            nodeMayLift: true
        startupGates:
          - name: warmup-the-gpu-driver
            match: {labels: {example.com/gpu: "true"}}
            taint:
              key: startup.nodegate.example.com/initializing-the-gpu-driver
              value: wait
              effect: NoSchedule
            readyWhen:
              pods: {namespace: kube-system, selector: {app: init}}
        """
    )
    gated = node(
        {"example.com/gpu": "true", "nodegate.dev/pool": "gpu-a100-spot"},
        (
            NodeTaint(
                "startup.nodegate.example.com/initializing-the-gpu-driver", "NoSchedule", "wait"
            ),
        ),
        created=NOW - timedelta(minutes=12),
    )
    held = HeldUpdate("0123456789abcdef", "it would remove taints from 40 of 50 nodes", "cm", NOW)
    status = ReconcilerStatus(
        "nodegate-7d9f-abcde", "0.1.0", 4, "fedcba9876543210", "cm", NOW, held, NOW
    )
    event = EventView(
        "RulesHeld",
        "ConfigMap/nodegate-rules",
        "rules update held: it would remove taints from 40 of 50 nodes (80% > the 50% limit)",
        3,
        NOW,
    )
    return status_report(
        NOW,
        [gated],
        gate_rules,
        LeaseView("nodegate-7d9f-abcde", NOW, 15),
        status,
        RulesSourceView("nodegate-system/nodegate-rules", "0123456789abcdef"),
        RecordsView(records=3),
        [event],
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_status_reads_at_each_width(width: int) -> None:
    target, out = console(width)
    print_status(target, a_status_report())  # type: ignore[arg-type]
    text = out.getvalue()
    assert fits(text, width), text
    assert "startup.nodegate.example.com/initializing-the-gpu-driver=wait:NoSchedule" in text
    assert "nodegate.dev/confirm-rules=0123456789abcdef" in text
    assert "gpu-a100-spot" in text


@pytest.mark.parametrize("width", WIDTHS)
def test_plan_reads_at_each_width(width: int) -> None:
    old = rules("labelTaints: []\n")
    new = rules(
        """\
        labelTaints:
          - name: team-with-a-long-name
            match: {labels: {example.com/team: a}}
            taint:
              {key: example.com/a-rather-long-taint-key-for-a-team, value: a, effect: NoSchedule}
            nodeMayLift: true
        """
    )
    nodes = [(node({"example.com/team": "a", "nodegate.dev/pool": "ci"}), PlanFacts(now=NOW))]
    target, out = console(width)
    print_plan(target, rules_change(nodes, new, old, 0.5), "the rules in force", False)
    text = out.getvalue()
    assert fits(text, width), text
    assert "+ taint example.com/a-rather-long-taint-key-for-a-team=a:NoSchedule" in text


def test_help_text_breaks_at_spaces_only_never_in_a_flag_or_a_long_path() -> None:
    assert wrap("default: no-dry-run", 16) == ["default:", "no-dry-run"]
    path = "/var/lib/nodegate/a-very-long-path-name"
    assert wrap(f"see {path} there", 20) == ["see", path, "there"]


def test_explain_shows_what_a_dry_run_rule_would_change_without_writing_it(
    tmp_path: Path,
) -> None:
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(
        "apiVersion: nodegate.dev/v1\nkind: NodeRules\nlabelTaints:\n"
        "  - name: trial\n    match: {labels: {example.com/accelerator: nvidia}}\n"
        "    taint: {key: example.com/trial, value: x, effect: NoSchedule}\n"
        "    nodeMayLift: true\n    dryRun: true\n"
    )
    args = ["explain", "--rules", str(rules_file), "--node", str(NODE)]
    result = runner.invoke(app, args, env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    assert "? dry run: rule trial would add taint example.com/trial=x:NoSchedule" in (result.stdout)
    assert "+ taint example.com/trial" not in result.stdout
