"""The Pulumi tools' caches (engine, Python host, Kubernetes provider): one stamp each, the
engine's wrapper module, and the provider's go.mod without its local replace."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import tomllib
from pathlib import Path

from nodegate.localcluster import build, gomodule, paths, pulumi_tools
from nodegate.localcluster.versions import (
    PULUMI_KUBERNETES_RELEASE,
    PULUMI_PKG_MODULE,
    PULUMI_SDK_MODULE,
    PULUMI_VERSION,
)

REPO = Path(__file__).resolve().parents[3]
CLIPBOARD = "github.com/tgummerer/clipboard v0.0.0-20241001131231-d02d263e614e"
PKG_GOMOD = f"""\
module github.com/pulumi/pulumi/pkg/v3

go 1.26.6

replace github.com/pulumi/pulumi/sdk/v3 => ../sdk

replace github.com/atotto/clipboard => {CLIPBOARD}
"""

PROVIDER_GOMOD = """\
module github.com/pulumi/pulumi-kubernetes/provider/v4

go 1.24.7

replace github.com/pulumi/pulumi-kubernetes/sdk/v4 => ../sdk

require github.com/pulumi/pulumi-kubernetes/sdk/v4 v4.24.0
"""


def test_the_engine_wrapper_requires_pkg_and_sdk_and_keeps_only_the_versioned_replace() -> None:
    wrapper = dataclasses.replace(
        gomodule.plain_wrapper("pulumi", "1.26.6", PULUMI_PKG_MODULE, PULUMI_VERSION),
        requires={PULUMI_PKG_MODULE: PULUMI_VERSION, PULUMI_SDK_MODULE: PULUMI_VERSION},
        replace_lines=gomodule.versioned_replaces(PKG_GOMOD),
    )
    lines = wrapper.render().splitlines()

    assert f"\t{PULUMI_SDK_MODULE} {PULUMI_VERSION}" in lines
    assert f"replace github.com/atotto/clipboard => {CLIPBOARD}" in lines
    assert not any("../sdk" in line for line in lines)


def test_the_provider_gomod_loses_its_local_replace_and_keeps_its_require() -> None:
    text = gomodule.drop_local_replaces(PROVIDER_GOMOD)

    assert "=> ../sdk" not in text
    assert "require github.com/pulumi/pulumi-kubernetes/sdk/v4 v4.24.0" in text.splitlines()


def test_each_tool_is_cached_apart_under_its_own_stamp(empty_cache: Path) -> None:
    def fill(staging: Path) -> None:
        (staging / paths.PULUMI).write_text("")

    build._build_staged(paths.pulumi_binary().parent, pulumi_tools.engine_stamp(), fill)

    assert pulumi_tools.engine_is_built()
    assert not pulumi_tools.python_host_is_built()
    assert not pulumi_tools.kubernetes_provider_is_built()
    assert not pulumi_tools.pulumi_is_built()


def test_the_python_host_is_not_built_without_its_exec_script(empty_cache: Path) -> None:
    """The host runs programs through `pulumi-language-python-exec` beside it."""

    def fill(staging: Path) -> None:
        (staging / paths.PULUMI_LANGUAGE_PYTHON).write_text("")

    build._build_staged(paths.pulumi_language_python_dir(), pulumi_tools.python_host_stamp(), fill)

    assert not pulumi_tools.python_host_is_built()


def test_the_project_pins_the_kubernetes_sdk_to_the_provider_release() -> None:
    """The SDK asks the engine for the plugin of its own version: what `pip install
    nodegate[infra]` brings is the release the real-engine tier builds and runs, and so is
    what `.venv` holds (a stale venv fails here, not as a missing plugin)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    infra = project["project"]["optional-dependencies"]["infra"]
    assert f"pulumi-kubernetes=={PULUMI_KUBERNETES_RELEASE}" in infra
    assert importlib.metadata.version("pulumi_kubernetes") == PULUMI_KUBERNETES_RELEASE
    assert pulumi_tools.kubernetes_plugin_dir(Path("/home")) == Path(
        f"/home/plugins/resource-kubernetes-v{PULUMI_KUBERNETES_RELEASE}"
    )
