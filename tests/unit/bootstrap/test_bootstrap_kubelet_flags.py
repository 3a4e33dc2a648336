"""kubelet's registration flags: rendered once, and read back the way kubelet reads them."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodegate.bootstrap.errors import BootstrapError
from nodegate.bootstrap.kubelet_flags import format_kubelet_flags, parse_kubelet_flags
from nodegate.bootstrap.oke import kubelet_extra_args, render_oke_bootstrap_script
from nodegate.bootstrap.registration import registration_labels, registration_taints
from nodegate.core.rules.model import TAINT_EFFECTS, Taint
from nodegate.core.text.k8s_names import kubelet_may_set_label
from tests.unit.bootstrap.support import pool_params, rules_and_pool

OKE_POOLS = pool_params("oke")


@pytest.mark.parametrize(("rule_set", "pool"), OKE_POOLS)
def test_flags_read_back_as_exactly_the_registration_taints_and_labels(
    rule_set: str, pool: str
) -> None:
    rules, node_pool = rules_and_pool(rule_set, pool)
    taints, labels = parse_kubelet_flags(kubelet_extra_args(rules, node_pool))
    assert taints == registration_taints(rules, node_pool)
    assert labels == registration_labels(node_pool)


@pytest.mark.parametrize(("rule_set", "pool"), OKE_POOLS)
def test_the_script_hands_oke_init_the_flags_as_one_shell_word(rule_set: str, pool: str) -> None:
    rules, node_pool = rules_and_pool(rule_set, pool)
    script = render_oke_bootstrap_script(rules, node_pool)
    line = next(x for x in script.splitlines() if x.startswith("bash /var/run/oke-init.sh"))
    words = shlex.split(line)  # what bash passes to oke-init.sh
    assert words[:3] == ["bash", "/var/run/oke-init.sh", "--kubelet-extra-args"]
    assert words[3:] == [kubelet_extra_args(rules, node_pool)]


def test_a_taint_without_value_is_written_key_colon_effect() -> None:
    rules, pool = rules_and_pool("awkward", "data-1")
    assert "flags.example.com/empty:NoSchedule" in kubelet_extra_args(rules, pool)


def test_a_label_with_empty_value_is_written_key_equals() -> None:
    rules, pool = rules_and_pool("awkward", "data-1")
    assert ",flags.example.com/empty=," in kubelet_extra_args(rules, pool)


def test_a_pool_without_taints_gets_no_register_with_taints_flag() -> None:
    rules, pool = rules_and_pool("awkward", "plain")
    assert kubelet_extra_args(rules, pool) == "--node-labels=nodegate.dev/pool=plain"


def test_kubelet_flags_are_refused_for_an_aks_pool() -> None:
    rules, pool = rules_and_pool("example", "batch")
    with pytest.raises(BootstrapError, match="'batch' is an aks pool"):
        kubelet_extra_args(rules, pool)


def test_the_flag_value_may_follow_as_the_next_word() -> None:
    taints, labels = parse_kubelet_flags("--register-with-taints a=b:NoSchedule --node-labels k=v")
    assert [t.flag() for t in taints] == ["a=b:NoSchedule"]
    assert labels == {"k": "v"}


def test_the_last_register_with_taints_wins_and_node_labels_merge() -> None:
    taints, labels = parse_kubelet_flags(
        "--register-with-taints=a:NoSchedule --node-labels=k=v "
        "--register-with-taints=b:NoExecute --node-labels=j=w,k=x"
    )
    assert [t.flag() for t in taints] == ["b:NoExecute"]
    assert labels == {"k": "x", "j": "w"}


def test_other_kubelet_flags_are_ignored() -> None:
    taints, labels = parse_kubelet_flags("--v=4 --node-labels=k=v --max-pods=110")
    assert taints == ()
    assert labels == {"k": "v"}


@pytest.mark.parametrize(
    ("args", "why"),
    [
        pytest.param("--register-with-taints=a=b:NoSchedule-", "removal", id="removal"),
        pytest.param("--register-with-taints=a=b", "key=value:Effect", id="no-effect"),
        pytest.param("--register-with-taints=a=b:Sometimes", "effect must be", id="bad-effect"),
        pytest.param("--register-with-taints=a=b=c:NoSchedule", "more than one '='", id="two-eq"),
        pytest.param("--register-with-taints=a:b:NoSchedule", "key=value:Effect", id="two-colons"),
        pytest.param("--register-with-taints=-a:NoSchedule", "key:", id="bad-key"),
        pytest.param("--register-with-taints=a=b c:NoSchedule", "key=value:Effect", id="space"),
        pytest.param("--register-with-taints=a='b':NoSchedule", "value:", id="quoted-value"),
        pytest.param(
            "--register-with-taints=a=b:NoSchedule,a=c:NoSchedule", "duplicated", id="duplicate"
        ),
        pytest.param("--node-labels=novalue", "malformed pair", id="label-no-eq"),
        pytest.param("--node-labels=k=bad/value", "invalid label", id="label-bad-value"),
        pytest.param("--node-labels=node-role.kubernetes.io/x=", "refuses", id="label-restricted"),
        pytest.param("--node-labels", "no value", id="flag-without-value"),
    ],
)
def test_flags_kubelet_would_refuse_or_drop_are_refused(args: str, why: str) -> None:
    with pytest.raises(BootstrapError, match=why):
        parse_kubelet_flags(args)


_NAME = st.from_regex(r"[a-z0-9]([-a-z0-9_.]{0,10}[a-z0-9])?", fullmatch=True)
_PREFIX = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,6}[a-z0-9])?(\.[a-z0-9]{1,5}){0,2}", fullmatch=True)
_KEY = st.one_of(_NAME, st.builds(lambda p, n: f"{p}/{n}", _PREFIX, _NAME))
_VALUE = st.one_of(
    st.just(""), st.from_regex(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?", fullmatch=True)
)
_TAINTS = st.dictionaries(st.tuples(_KEY, st.sampled_from(TAINT_EFFECTS)), _VALUE, max_size=6).map(
    lambda d: tuple(Taint(key=k, value=v, effect=e) for (k, e), v in sorted(d.items()))
)
_LABELS = st.dictionaries(_KEY.filter(kubelet_may_set_label), _VALUE, max_size=6)


@given(taints=_TAINTS, labels=_LABELS)
def test_any_valid_taints_and_labels_survive_the_round_trip(
    taints: tuple[Taint, ...], labels: dict[str, str]
) -> None:
    args = " ".join(format_kubelet_flags(taints, labels))
    assert parse_kubelet_flags(args) == (taints, labels)
