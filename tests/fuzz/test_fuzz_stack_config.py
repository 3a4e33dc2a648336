"""The Pulumi program's reading of its stack (`prepare`): the stack config and the rules it
names (a file, or `nodegate:rulesInline`). Hostile values end in one of the program's own
errors, which Pulumi prints without a traceback; never another exception."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pulumi
import yaml
from hypothesis import given

from nodegate.infra.program import prepare
from tests.fuzz.profiles import fuzz
from tests.fuzz.strategies import ROOT, RULES_SEEDS, grafted, mutated, plain_seed, seed_bytes

STACK = "oke-example"
USER_DATA = Path("examples/user-data/gpu-cloud-init.yaml")


def stack_config() -> dict[str, Any]:
    """The oke-example stack's `nodegate:*` values, keyed as `prepare` takes them."""
    config = yaml.safe_load((ROOT / f"Pulumi.{STACK}.yaml").read_text(encoding="utf-8"))
    return {
        key.removeprefix("nodegate:"): value
        for key, value in config["config"].items()
        if key.startswith("nodegate:")
    }


CONFIG = stack_config()
RULES = plain_seed(RULES_SEEDS[0])


def prepare_or_refuse(raw: dict[str, Any], rules_file: bytes) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        project = Path(scratch)
        (project / "examples" / "rules.yaml").parent.mkdir(parents=True)
        (project / "examples" / "rules.yaml").write_bytes(rules_file)
        (project / USER_DATA).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / USER_DATA, project / USER_DATA)
        try:
            prepare(raw, STACK, project)
        # The program's own refusals (InvalidRulesError, InvalidStackConfigError,
        # BootstrapRenderError): Pulumi prints their message alone.
        except pulumi.RunError as err:
            assert str(err)


@fuzz
@given(mutated(seed_bytes(RULES_SEEDS)))
def test_mutated_rules_file_of_a_stack_is_prepared_or_refused(rules_file: bytes) -> None:
    prepare_or_refuse(CONFIG, rules_file)


@fuzz
@given(grafted(RULES))
def test_inline_rules_of_a_stack_are_prepared_or_refused(inline: Any) -> None:
    raw = {key: value for key, value in CONFIG.items() if key != "rules"}
    prepare_or_refuse({**raw, "rulesInline": inline}, b"")


@fuzz
@given(grafted(CONFIG, whole=False))
def test_stack_config_with_a_subtree_replaced_is_prepared_or_refused(raw: Any) -> None:
    prepare_or_refuse(raw, seed_bytes(RULES_SEEDS)[0])
