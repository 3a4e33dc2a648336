"""The kubelet files of self-managed nodes: read back as kubelet reads them, refusals named."""

from __future__ import annotations

import shlex

import pytest
import yaml

from nodegate.bootstrap.errors import BootstrapError
from nodegate.bootstrap.kubelet_files import kubelet_files
from nodegate.bootstrap.kubelet_flags import parse_kubelet_flags
from nodegate.bootstrap.registration import registration_labels, registration_taints
from nodegate.core.rules.model import Taint
from tests.unit.bootstrap.support import check_golden, pool_params, rules_and_pool

ALL_POOLS = pool_params("oke") + pool_params("aks")


def _extra_args(env_file: str) -> str:
    [line] = [x for x in env_file.splitlines() if not x.startswith("#")]
    name, _, quoted = line.partition("=")
    assert name == "KUBELET_EXTRA_ARGS"
    [value] = shlex.split(quoted)  # as systemd's EnvironmentFile (or sh) unquotes it
    return value


def _dropin_taints(text: str) -> tuple[Taint, ...]:
    """registerWithTaints read by PyYAML, a YAML 1.1 reader like kubelet's sigs.k8s.io/yaml."""
    data = yaml.safe_load(text)
    assert data["apiVersion"] == "kubelet.config.k8s.io/v1beta1"
    assert data["kind"] == "KubeletConfiguration"
    return tuple(
        Taint.model_construct(key=t["key"], value=t.get("value", ""), effect=t["effect"])
        for t in data.get("registerWithTaints", [])
    )


@pytest.mark.parametrize(("rule_set", "pool"), ALL_POOLS)
def test_flags_mode_reads_back_as_the_registration_taints_and_labels(
    rule_set: str, pool: str
) -> None:
    rules, node_pool = rules_and_pool(rule_set, pool)
    files = kubelet_files(rules, node_pool, "flags")
    assert files.config_dropin is None
    assert parse_kubelet_flags(_extra_args(files.env_file)) == (
        registration_taints(rules, node_pool),
        registration_labels(node_pool),
    )


@pytest.mark.parametrize(("rule_set", "pool"), ALL_POOLS)
def test_config_mode_puts_the_taints_in_the_drop_in_and_the_labels_in_the_flags(
    rule_set: str, pool: str
) -> None:
    rules, node_pool = rules_and_pool(rule_set, pool)
    files = kubelet_files(rules, node_pool, "config", config_dir="/etc/kubelet.d")
    assert files.config_dropin is not None
    assert _dropin_taints(files.config_dropin) == registration_taints(rules, node_pool)
    args = _extra_args(files.env_file)
    assert args.split()[0] == "--config-dir=/etc/kubelet.d"
    assert parse_kubelet_flags(args) == ((), registration_labels(node_pool))


def test_a_taint_value_yaml_1_1_reads_as_a_boolean_stays_a_string() -> None:
    rules, pool = rules_and_pool("awkward", "data-1")  # a taint with value "yes"
    files = kubelet_files(rules, pool, "config")
    assert files.config_dropin is not None
    values = [t.value for t in _dropin_taints(files.config_dropin)]
    assert "yes" in values


@pytest.mark.parametrize("mode", ["flags", "config"])
def test_files_match_the_reviewed_golden_files(mode: str) -> None:
    rules, pool = rules_and_pool("example", "gpu")
    files = kubelet_files(rules, pool, mode, extra_args="--max-pods=50")
    check_golden(f"example/gpu.kubelet-{mode}.env", files.env_file)
    if files.config_dropin is not None:
        check_golden(f"example/gpu.kubelet-{mode}.conf", files.config_dropin)


def test_other_kubelet_flags_are_kept_after_nodegates() -> None:
    rules, pool = rules_and_pool("example", "ci")
    args = _extra_args(kubelet_files(rules, pool, "flags", extra_args=" --max-pods=50 ").env_file)
    assert args.split()[-1] == "--max-pods=50"


def test_a_pool_without_taints_gets_a_drop_in_that_sets_nothing() -> None:
    rules, pool = rules_and_pool("awkward", "plain")
    files = kubelet_files(rules, pool, "config")
    assert files.config_dropin is not None
    assert "registerWithTaints" not in yaml.safe_load(files.config_dropin)


@pytest.mark.parametrize(
    ("extra_args", "message"),
    [
        pytest.param(
            "--register-with-taints=a:NoSchedule", "set --register-with-taints", id="taints"
        ),
        pytest.param("--node-labels a=b", "set --node-labels", id="labels"),
        pytest.param("--config-dir=/x", "set --config-dir", id="config-dir"),
        pytest.param('--v="2"', "contain '\"'", id="quote"),
        pytest.param("--root-dir=$HOME", "contain '\\$'", id="dollar"),
        pytest.param("--v=2\nEVIL=1", "contain '\\\\n'", id="newline"),
    ],
)
def test_extra_args_that_would_override_or_break_the_file_are_refused(
    extra_args: str, message: str
) -> None:
    rules, pool = rules_and_pool("example", "gpu")
    with pytest.raises(BootstrapError, match=f"pool 'gpu': extra kubelet args {message}"):
        kubelet_files(rules, pool, "flags", extra_args=extra_args)


def test_a_relative_config_dir_is_refused() -> None:
    rules, pool = rules_and_pool("example", "gpu")
    with pytest.raises(BootstrapError, match="must be an absolute path"):
        kubelet_files(rules, pool, "config", config_dir="kubelet.conf.d")


def test_an_unknown_mode_is_refused_with_the_modes() -> None:
    rules, pool = rules_and_pool("example", "gpu")
    with pytest.raises(BootstrapError, match="'drop-in' is not one of flags, config"):
        kubelet_files(rules, pool, "drop-in")
