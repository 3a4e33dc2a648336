"""`nodegate migrate nidhogg`: a nidhogg config file (YAML or JSON) is outside input, and so are
the label selector strings in it. Hostile bytes, or a config whose values have the wrong types,
end in rules YAML or a RulesError at the config's setting; a selector string in requirements or
a SelectorSyntaxError; never another exception."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from nodegate.core.text.errors import RulesError
from nodegate.core.text.k8s_names import label_value_problem, qualified_name_problem
from nodegate.core.text.yaml_input import read_yaml_documents
from nodegate.migrate.conversion import Place, YamlFile
from nodegate.migrate.label_selector import SelectorSyntaxError, parse_selector
from nodegate.migrate.nidhogg import convert_nidhogg, convert_nidhogg_config
from tests.fuzz.located import rules_or_refusal
from tests.fuzz.profiles import fuzz
from tests.fuzz.strategies import ROOT, mutated, paths_of, plain_data, replaced

SEED = ROOT / "examples" / "migrate" / "nidhogg.json"
PELOTECH = b"""\
daemonsets:
  - name: kiam
    namespace: kube-system
nodeSelector:
  - "node-role.kubernetes.io/node"
  - "!node-role.kubernetes.io/master,kubernetes.io/os=linux"
  - "aws.amazon.com/ec2.asg.name notin (gpu, )"
taintNamePrefix: "nidhogg.uswitch.com"
taintEffect: NoExecute
taintRemovalDelayInSeconds: 10
"""
CONFIG = json.loads(SEED.read_text(encoding="utf-8"))
CHART_DEFAULT = (
    b'{"daemonsets":[{"name":"fluentd","namespace":"logging"}],"taintRemovalDelayInSeconds":5}'
)
DAEMON_SETS = b"""\
apiVersion: v1
kind: List
items:
  - kind: DaemonSet
    metadata: {name: fluentd, namespace: logging}
    spec: {template: {spec: {nodeSelector: {kubernetes.io/os: linux}}}}
"""
SELECTOR_TEXT = st.lists(
    st.sampled_from([*"ab.-_/=!(),<>9 \t", "in", "notin", "Z", "\u00e9", "a" * 64]), max_size=20
).map("".join)
"""Strings made mostly of the selector grammar's own characters and words."""


@fuzz
@given(mutated([SEED.read_bytes(), PELOTECH]))
def test_a_mutated_nidhogg_file_converts_or_is_refused(data: bytes) -> None:
    rules_or_refusal(lambda: convert_nidhogg(data, "nidhogg.json"), "nidhogg")


@fuzz
@given(mutated([DAEMON_SETS]))
def test_a_mutated_daemon_sets_file_converts_the_chart_default_or_is_refused(data: bytes) -> None:
    """`--daemon-sets` files are outside input too (`kubectl` output, hand-written manifests)."""
    try:
        files = [YamlFile("ds.yaml", tuple(read_yaml_documents(data, "ds.yaml")))]
    except RulesError as err:
        assert err.problems
        return
    rules_or_refusal(
        lambda: convert_nidhogg(CHART_DEFAULT, "nidhogg.json", daemon_sets=files),
        "nidhogg --daemon-sets ds.yaml",
    )


@fuzz
@given(st.data())
def test_a_nidhogg_config_with_any_value_anywhere_converts_or_is_refused(
    data: st.DataObject,
) -> None:
    path = data.draw(st.sampled_from(paths_of(CONFIG)))
    config = replaced(CONFIG, path, data.draw(plain_data))
    rules_or_refusal(lambda: convert_nidhogg_config(config, Place("nidhogg.json", ())), "nidhogg")


@fuzz
@given(SELECTOR_TEXT)
def test_a_selector_string_parses_to_valid_requirements_or_is_refused(text: str) -> None:
    try:
        requirements = parse_selector(text)
    except SelectorSyntaxError as err:
        assert str(err)
    else:
        for requirement in requirements:
            assert qualified_name_problem(requirement.key) is None
            assert all(label_value_problem(v) is None for v in requirement.values)
