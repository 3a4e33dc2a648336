"""`nodegate render`: prints exactly the library's rendering, and fails clearly otherwise."""

from __future__ import annotations

import base64
import random
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from nodegate.cli.render_cmd import render
from tests.unit.bootstrap.support import FIXTURES, GOLDEN

EXAMPLE = str(Path(__file__).parents[3] / "examples" / "rules.yaml")
AWKWARD = str(FIXTURES / "awkward-rules.yaml")
AUTOSCALED = str(FIXTURES / "autoscaled-rules.yaml")


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("render")(render)

    @app.command("version")
    def version() -> None:  # a second command keeps `render` a subcommand, as in cli/main.py
        """Unused."""

    return app


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(_app(), ["render", *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("rules", "pool", "fmt", "golden"),
    [
        pytest.param(EXAMPLE, "ci", "cloud-init", "example/ci.cloud-init.sh", id="cloud-init"),
        pytest.param(
            EXAMPLE, "gpu", "kubelet-args", "example/gpu.kubelet-args.txt", id="kubelet-args"
        ),
        pytest.param(EXAMPLE, "batch", "aks-json", "example/batch.aks.json", id="aks-json"),
        pytest.param(AWKWARD, "data-1", None, "awkward/data-1.cloud-init.sh", id="default-oke"),
        pytest.param(AWKWARD, "edge-aks", None, "awkward/edge-aks.aks.json", id="default-aks"),
        pytest.param(
            AUTOSCALED,
            "gpu-oke",
            "oke-metadata",
            "autoscaled/gpu-oke.oke-metadata.json",
            id="oke-metadata",
        ),
        pytest.param(
            AUTOSCALED,
            "gpu-nap",
            None,
            "autoscaled/gpu-nap.karpenter-nodepool.yaml",
            id="default-karpenter",
        ),
    ],
)
def test_render_prints_the_golden_rendering(
    rules: str, pool: str, fmt: str | None, golden: str
) -> None:
    args = ["--rules", rules, "--pool", pool, *(["--format", fmt] if fmt else [])]
    code, out, err = _run(*args)
    assert (code, err) == (0, "")
    assert out == (GOLDEN / golden).read_text(encoding="utf-8")


def test_user_data_is_merged_into_the_cloud_init() -> None:
    code, out, _ = _run(
        "--rules", EXAMPLE, "--pool", "gpu", "--user-data", str(FIXTURES / "user-script.sh")
    )
    assert code == 0
    assert out == (GOLDEN / "example/gpu.cloud-init+user-script.mime").read_text(encoding="utf-8")


def test_aks_initialization_taints_flag_routes_gates_there() -> None:
    code, out, _ = _run("--rules", EXAMPLE, "--pool", "batch", "--aks-initialization-taints")
    assert code == 0
    assert out == (GOLDEN / "example/batch.aks-init-taints.json").read_text(encoding="utf-8")


def test_invalid_rules_print_every_problem_line_and_exit_1(tmp_path: Path) -> None:
    broken = tmp_path / "rules.yaml"
    broken.write_text(
        "apiVersion: nodegate.dev/v1\nkind: NodeRules\nlabelTaints:\n"
        "  - name: Bad_Name\n    match: {labels: {a: b}}\n"
        "    taint: {key: a, value: b, effect: NoSchedul}\n    nodeMayLift: true\n",
        encoding="utf-8",
    )
    code, out, err = _run("--rules", str(broken), "--pool", "ci")
    assert code == 1
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 2
    assert all(line.startswith(f"{broken}:") for line in lines)
    assert any("did you mean 'NoSchedule'" in line for line in lines)


def test_a_missing_rules_file_is_reported_like_any_rules_problem(tmp_path: Path) -> None:
    code, _, err = _run("--rules", str(tmp_path / "nope.yaml"), "--pool", "ci")
    assert code == 1
    assert "cannot read file" in err


def test_an_unknown_pool_lists_the_pools_and_exits_2() -> None:
    code, out, err = _run("--rules", EXAMPLE, "--pool", "cpu")
    assert (code, out) == (2, "")
    assert "no pool named 'cpu'" in err
    assert "ci, gpu, batch" in err


@pytest.mark.parametrize(
    ("pool", "fmt", "hint"),
    [
        pytest.param("batch", "cloud-init", "use --format aks-json", id="cloud-init-for-aks"),
        pytest.param("batch", "kubelet-args", "use --format aks-json", id="kubelet-args-for-aks"),
        pytest.param(
            "ci", "aks-json", "use --format cloud-init or --format kubelet-args", id="aks-for-oke"
        ),
    ],
)
def test_a_format_that_does_not_fit_the_provider_exits_2(pool: str, fmt: str, hint: str) -> None:
    code, out, err = _run("--rules", EXAMPLE, "--pool", pool, "--format", fmt)
    assert (code, out) == (2, "")
    assert f"does not apply to pool '{pool}'" in err
    assert hint in err


def test_user_data_with_a_format_that_ignores_it_exits_2() -> None:
    code, _, err = _run(
        "--rules", EXAMPLE, "--pool", "ci", "--format", "kubelet-args",
        "--user-data", str(FIXTURES / "user-script.sh"),
    )  # fmt: skip
    assert code == 2
    assert "--user-data" in err


def test_oversize_user_data_is_refused_with_exit_1(tmp_path: Path) -> None:
    big = tmp_path / "big.sh"
    noise = base64.b64encode(random.Random(7).randbytes(24_000)).decode()
    big.write_text("#!/bin/bash\n# " + noise + "\n", encoding="utf-8")  # gzip cannot help
    code, out, err = _run("--rules", EXAMPLE, "--pool", "ci", "--user-data", str(big))
    assert (code, out) == (1, "")
    assert "pool 'ci'" in err
    assert "23,864" in err  # 24,000 less the pool's kubelet-extra-args metadata


def test_image_family_ubuntu_prints_the_ubuntu_golden_rendering() -> None:
    code, out, err = _run("--rules", EXAMPLE, "--pool", "ci", "--image-family", "ubuntu")
    assert (code, err) == (0, "")
    assert out == (GOLDEN / "example" / "ci.ubuntu.cloud-init.sh").read_text(encoding="utf-8")


def test_an_unknown_image_family_is_a_usage_error() -> None:
    code, out, _ = _run("--rules", EXAMPLE, "--pool", "ci", "--image-family", "debian")
    assert (code, out) == (2, "")


def test_a_karpenter_pool_has_no_agent_pool_to_render() -> None:
    code, out, err = _run("--rules", AUTOSCALED, "--pool", "gpu-nap", "--format", "aks-json")
    assert (code, out) == (2, "")
    assert err == (
        "--format aks-json does not apply to pool 'gpu-nap' (provider aks run by Karpenter); "
        "use --format karpenter-nodepool\n"
    )


def test_a_cloud_pool_has_no_karpenter_nodepool_to_render() -> None:
    code, _, err = _run("--rules", AUTOSCALED, "--pool", "gpuaks", "--format", "karpenter-nodepool")
    assert code == 2
    assert "use --format aks-json" in err


ORACLE = str(FIXTURES / "oracle-karpenter-rules.yaml")


def test_an_oracle_spot_nodepool_is_printed_after_its_toleration_notes() -> None:
    code, out, err = _run("--rules", ORACLE, "--pool", "kpo-spot")
    assert (code, err) == (0, "")
    header, _, body = out.partition("apiVersion:")
    assert header.startswith(
        "# - Pool 'kpo-spot' may launch spot capacity on karpenter-provider-oci"
    )
    assert all(line.startswith("#") for line in header.splitlines())
    assert "operator: Exists, effect: NoSchedule}" in header
    golden = (GOLDEN / "oracle" / "kpo-spot.karpenter-nodepool.yaml").read_text(encoding="utf-8")
    assert "apiVersion:" + body == golden


def test_an_on_demand_nodepool_is_printed_without_notes() -> None:
    code, out, _ = _run("--rules", ORACLE, "--pool", "kpo-on-demand")
    assert code == 0
    assert out == (GOLDEN / "oracle" / "kpo-on-demand.karpenter-nodepool.yaml").read_text(
        encoding="utf-8"
    )
