"""Run the Pulumi program under `pulumi.runtime.set_mocks`, recording every resource it declares.

This is Pulumi's documented unit-test method (pulumi/examples testing-unit-py): a `Mocks`
subclass stands in for the engine and providers, so the program runs without a CLI or cloud
credentials. Each run starts from fresh runtime state: `reset_options` drops the previous root
stack and settings, `set_all_config` replaces the whole config map *before* the program reads
it, and `set_mocks` installs a new monitor and a new root `Stack`. The program itself runs
inside `pulumi.runtime.test`, which waits for every output and re-raises the program's error.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime import settings
from pulumi.runtime.mocks import MockCallArgs, MockMonitor, MockResourceArgs

from nodegate.bootstrap.registration import registration_labels, registration_taints
from nodegate.core.rules.loader import load_rules
from nodegate.core.rules.model import NodePool, NodeRules

REPO = Path(__file__).resolve().parents[2]
OKE_NODE_POOL = "oci:ContainerEngine/nodePool:NodePool"
AKS_AGENT_POOL = "azure-native:containerservice:AgentPool"
OKE_COMPONENT = "nodegate:index:OkeNodePool"
AKS_COMPONENT = "nodegate:index:AksNodePool"


@dataclass(frozen=True)
class Declared:
    """One resource as the engine would have received it."""

    typ: str
    name: str
    inputs: dict[str, Any]
    custom: bool

    def canonical(self) -> bytes:
        """The inputs as canonical JSON: what the engine diffs (property maps are unordered)."""
        return json.dumps(self.inputs, sort_keys=True, separators=(",", ":")).encode()


@dataclass
class ProgramRun:
    """What one run of the program declared, exported, logged, and raised."""

    resources: list[Declared] = field(default_factory=list)
    urns: list[str] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    logs: list[logging.LogRecord] = field(default_factory=list)
    error: BaseException | None = None
    ignore_changes: dict[str, list[str]] = field(default_factory=dict)
    """The `ignore_changes` option of each resource, by name (what the engine received)."""
    dependencies: dict[str, list[str]] = field(default_factory=dict)
    """The URNs each resource depends on (its `depends_on` and its inputs'), by name."""

    def of_type(self, typ: str) -> list[Declared]:
        return [r for r in self.resources if r.typ == typ]

    def one(self, typ: str, name: str) -> Declared:
        matches = [r for r in self.of_type(typ) if r.name == name]
        assert len(matches) == 1, f"expected one {typ} named {name}, got {len(matches)}"
        return matches[0]

    @property
    def warnings(self) -> list[str]:
        return [r.getMessage() for r in self.logs if r.levelno == logging.WARNING]


class RecordingMocks(pulumi.runtime.Mocks):
    """Echo inputs back as outputs and record every resource, custom or component."""

    def __init__(self, run: ProgramRun) -> None:
        self.run = run

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
        self.run.resources.append(
            Declared(args.typ, args.name, dict(args.inputs), bool(args.custom))
        )
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        return {}, None


class RecordingMonitor(MockMonitor):
    """The mock monitor, also recording resource options the mocks do not see."""

    def __init__(self, run: ProgramRun) -> None:
        super().__init__(RecordingMocks(run))
        self.run = run

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802  (the gRPC method's name)
        if request.ignoreChanges:
            self.run.ignore_changes[request.name] = list(request.ignoreChanges)
        self.run.dependencies[request.name] = list(request.dependencies)
        return super().RegisterResource(request)  # type: ignore[no-untyped-call]


class _Collect(logging.Handler):
    def __init__(self, records: list[logging.LogRecord]) -> None:
        super().__init__()
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def config_values(config: Mapping[str, Any]) -> dict[str, str]:
    """Config as the CLI hands it to a program: strings as-is, structured values as JSON."""
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}


def stack_file_config(name: str) -> dict[str, Any]:
    """The `config:` map of a stack file at the repository root, e.g. Pulumi.oke-example.yaml."""
    data = yaml.safe_load((REPO / f"Pulumi.{name}.yaml").read_text(encoding="utf-8"))
    return dict(data["config"])


def run_program(
    config: Mapping[str, Any],
    *,
    stack: str,
    project_dir: Path = REPO,
    program: Callable[[], object] | None = None,
) -> ProgramRun:
    """Run `nodegate.infra.program.main` (or `program`) under mocks; never raises."""
    from nodegate.infra.program import main

    run = ProgramRun()
    settings.reset_options(project="nodegate", stack=stack)
    pulumi.runtime.set_all_config(config_values(config))
    logger = logging.getLogger(f"nodegate-pulumi-test-{id(run)}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(_Collect(run.logs))
    monitor = RecordingMonitor(run)
    pulumi.runtime.set_mocks(
        monitor.mocks,
        project="nodegate",
        stack=stack,
        preview=False,
        logger=logger,
        monitor=monitor,
    )

    @pulumi.runtime.test  # type: ignore[untyped-decorator]  # pulumi leaves it untyped
    def body() -> pulumi.Output[None]:
        if program is not None:
            program()
        else:
            main(project_dir=project_dir)
        root = settings.get_root_resource()
        exported = getattr(root, "outputs", {})
        return pulumi.Output.from_input(exported).apply(run.outputs.update)

    try:
        body()
    # The run's error is part of what a test inspects (message, and that nothing was declared).
    except Exception as err:
        run.error = err
    run.urns = list(monitor.resources)
    return run


def decode_user_data(declared: Declared) -> str:
    """The cloud-init an OKE node boots with: the node pool's `user_data` as cloud-init reads
    it (base64, gunzipped when nodegate had to gzip it to fit)."""
    from tests.unit.bootstrap.support import decode_payload

    return decode_payload(declared.inputs["nodeMetadata"]["user_data"])


def kubelet_registration(cloud_init: str) -> tuple[set[str], dict[str, str]]:
    """The taints and labels kubelet registers with, read from the `--kubelet-extra-args`."""
    from nodegate.bootstrap.kubelet_flags import parse_kubelet_flags

    found = re.findall(r"--kubelet-extra-args '([^']*)'", cloud_init)
    assert len(found) == 1, f"expected one --kubelet-extra-args in the cloud-init, got {found}"
    taints, labels = parse_kubelet_flags(found[0])
    return {t.flag() for t in taints}, labels


def example_rules_data() -> dict[str, Any]:
    """examples/rules.yaml as plain data, to edit one rule at a time in a test."""
    data = yaml.safe_load((REPO / "examples" / "rules.yaml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def write_rules(project: Path, data: Mapping[str, Any]) -> None:
    """Write rules data as the project's rules.yaml."""
    (project / "rules.yaml").write_text(yaml.safe_dump(dict(data)), encoding="utf-8")


def example_pool(name: str) -> tuple[NodeRules, NodePool]:
    """The example rules and one of their pools."""
    rules = load_rules(REPO / "examples" / "rules.yaml")
    pool = rules.pool(name)
    assert pool is not None, f"examples/rules.yaml has no pool {name!r}"
    return rules, pool


def expected_registration(name: str) -> tuple[set[str], dict[str, str]]:
    """What the example pool's nodes must register with, as the rules derive it."""
    rules, pool = example_pool(name)
    taints = {t.flag() for t in registration_taints(rules, pool)}
    assert taints, f"example pool {name!r} has no registration taint: the test would prove nothing"
    return taints, registration_labels(pool)
