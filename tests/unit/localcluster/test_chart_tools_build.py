"""The chart tools' caches (helm v3 and v4, helm-unittest, chart-testing): one stamp each, and
the wrapper module that lets a module with a `replace` be built at all."""

from __future__ import annotations

from pathlib import Path

from nodegate.localcluster import build, gomodule, paths
from nodegate.localcluster.versions import HELM4_VERSION, HELM_VERSION

HELM_UNITTEST_GOMOD = """\
module github.com/helm-unittest/helm-unittest

go 1.26.0

require (
	github.com/vmware-labs/yaml-jsonpath v0.3.2 // indirect
)

replace github.com/vmware-labs/yaml-jsonpath v0.3.2 => github.com/helm-unittest/yaml-jsonpath v0.4.0
"""


def test_a_replace_by_a_published_version_is_copied_and_a_local_one_is_not() -> None:
    text = (
        HELM_UNITTEST_GOMOD
        + "replace (\n\texample.com/a => ./staging/a\n\tb.io/x => c.io/x v1.2.3\n)\n"
    )

    assert gomodule.versioned_replaces(text) == (
        "github.com/vmware-labs/yaml-jsonpath v0.3.2 => github.com/helm-unittest/yaml-jsonpath "
        "v0.4.0",
        "b.io/x => c.io/x v1.2.3",
    )


def test_the_wrapper_module_renders_the_copied_replace() -> None:
    wrapper = gomodule.WrapperModule(
        name="nodegate.local/controlplane/helm-unittest",
        go_version="1.26.0",
        requires={"github.com/helm-unittest/helm-unittest": "v1.1.2"},
        replace_lines=gomodule.versioned_replaces(HELM_UNITTEST_GOMOD),
    )

    assert (
        "replace github.com/vmware-labs/yaml-jsonpath v0.3.2 => "
        "github.com/helm-unittest/yaml-jsonpath v0.4.0"
    ) in wrapper.render().splitlines()


def test_helm_3_and_4_are_cached_apart_each_under_its_own_stamp(
    empty_cache: Path,
) -> None:

    def fill(staging: Path) -> None:
        (staging / paths.HELM).write_text("")

    build._build_staged(paths.helm_dir(HELM4_VERSION), build.helm_stamp(HELM4_VERSION), fill)

    assert build.helm_is_built(HELM4_VERSION)
    assert not build.helm_is_built(HELM_VERSION)
    assert build.helm_stamp(HELM4_VERSION)["package"] == "helm.sh/helm/v4/cmd/helm"
    assert paths.helm_binary(HELM4_VERSION) != paths.helm_binary(HELM_VERSION)


def test_chart_testing_is_not_built_without_its_config_files(
    empty_cache: Path,
) -> None:
    """`ct lint` reads etc/chart_schema.yaml and etc/lintconf.yaml (CT_CONFIG_DIR)."""

    def fill(staging: Path) -> None:
        (staging / paths.CHART_TESTING).write_text("")

    build._build_staged(paths.chart_testing_binary().parent, build.chart_testing_stamp(), fill)

    assert not build.chart_testing_is_built()
