"""Input no editor should have produced still gets a located error and exit code, never a
traceback, from every command that reads it."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from nodegate.cli.main import app
from tests.unit.core.test_yaml_input import HEADER, alias_bomb
from tests.unit.manifests.support import EXAMPLE_RULES

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "examples" / "rules.yaml"
NODE = ROOT / "examples" / "nodes" / "gpu-node.yaml"
runner = CliRunner()


def latin1_file(tmp_path: Path) -> Path:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(HEADER.encode() + "# café\n".encode("latin-1"))
    return path


def assert_no_traceback(result: Result) -> None:
    """The command exited on purpose (CliRunner turns an uncaught exception into exit 1)."""
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output


def test_validate_refuses_a_file_that_is_not_utf8_with_its_line(tmp_path: Path) -> None:
    path = latin1_file(tmp_path)

    result = runner.invoke(app, ["validate", str(path)])

    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"{path}:3:6: (document): byte 0xE9 (byte offset 49) is not UTF-8; nodegate reads UTF-8 "
        "only: save the file as UTF-8 (e.g. iconv -f latin1 -t UTF-8 if it was written as "
        "Latin-1)"
    ]
    assert_no_traceback(result)


@pytest.mark.timeout(10)  # unbounded, it grows without end: fail, do not hang
def test_validate_refuses_an_alias_bomb_at_the_alias(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb())

    result = runner.invoke(app, ["validate", str(path)])

    assert result.exit_code == 1
    assert result.stderr.startswith(f"{path}:8:20: (document): alias *a4 (13,942 values) takes")
    assert_no_traceback(result)


def test_validate_refuses_a_control_character_with_its_place(tmp_path: Path) -> None:
    path = tmp_path / "ctrl.yaml"
    path.write_text(HEADER + "labelTaints: [\x01]\n")

    result = runner.invoke(app, ["validate", str(path)])

    assert result.exit_code == 1
    assert result.stderr.startswith(f"{path}:3:15: (document): character U+0001 is not allowed")
    assert_no_traceback(result)


def test_render_refuses_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = latin1_file(tmp_path)

    result = runner.invoke(app, ["render", "--rules", str(path), "--pool", "gpu"])

    assert result.exit_code == 1
    assert result.stderr.startswith(f"{path}:3:6: (document): byte 0xE9")
    assert_no_traceback(result)


def test_explain_refuses_a_node_file_that_is_not_utf8_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "node.yaml"
    path.write_bytes(NODE.read_bytes().replace(b"gpu-pool-0", b"gpu-pool-\xff"))

    result = runner.invoke(app, ["explain", "--rules", str(RULES), "--node", str(path)])

    assert result.exit_code == 2
    assert result.stderr.startswith(f"{path}:5:18: (document): byte 0xFF (byte offset")
    assert_no_traceback(result)


@pytest.mark.timeout(10)
def test_explain_refuses_a_node_alias_bomb(tmp_path: Path) -> None:
    path = tmp_path / "node.yaml"
    path.write_text(alias_bomb().replace(HEADER, "kind: Node\n"))

    result = runner.invoke(app, ["explain", "--rules", str(RULES), "--node", str(path)])

    assert result.exit_code == 2
    assert "takes the document past 50,000 values" in result.stderr
    assert_no_traceback(result)


def test_explain_names_the_node_item_it_cannot_read(tmp_path: Path) -> None:
    path = tmp_path / "nodes.yaml"
    path.write_text(
        "kind: List\nitems:\n  - kind: Node\n    metadata: {name: a}\n"
        "  - kind: Node\n    spec: {taints: [{value: x}]}\n"
    )

    result = runner.invoke(app, ["explain", "--rules", str(RULES), "--node", str(path)])

    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"{path}:5:5: items[1]: cannot read this Node (KeyError: 'key'); expected a Node or a "
        "list of Nodes, as `kubectl get node NAME -o yaml` prints it"
    ]
    assert_no_traceback(result)


def test_manifests_refuses_a_rules_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = latin1_file(tmp_path)

    result = runner.invoke(
        app, ["manifests", "--rules", str(path), "--image-repository", "r.example/nodegate"]
    )

    assert result.exit_code == 1
    assert result.stderr.startswith(f"{path}:3:6: (document): byte 0xE9")
    assert_no_traceback(result)


@pytest.mark.timeout(10)
def test_manifests_refuses_a_settings_alias_bomb_at_the_alias(tmp_path: Path) -> None:
    path = tmp_path / "settings.yaml"
    path.write_text(alias_bomb().replace(HEADER, ""))

    result = runner.invoke(
        app,
        [
            "manifests",
            "--rules",
            str(EXAMPLE_RULES),
            "--settings",
            str(path),
            "--image-repository",
            "r.example/nodegate",
        ],
    )

    assert result.exit_code == 1
    assert result.stderr.startswith(f"{path}:6:20: (document): alias *a4 (13,942 values) takes")
    assert_no_traceback(result)


def test_explain_refuses_a_now_that_is_not_a_time_with_how_to_write_one() -> None:
    result = runner.invoke(
        app, ["explain", "--rules", str(RULES), "--node", str(NODE), "--now", "yesterday"]
    )

    assert result.exit_code == 1
    assert "--now 'yesterday' is not an RFC 3339 time: write e.g." in result.stderr
    assert_no_traceback(result)
