"""Every pinned version of the local control plane, in one place.

The e2e tier must test against the Kubernetes release the project claims to support, so the
binaries are built from exactly these module versions; bumping one here rebuilds the cache.
"""

from __future__ import annotations

from dataclasses import dataclass

KUBERNETES_MODULE = "k8s.io/kubernetes"
KUBERNETES_VERSION = "v1.36.3"

ETCD_MODULE = "go.etcd.io/etcd/server/v3"
ETCD_VERSION = "v3.6.16"

KWOK_MODULE = "sigs.k8s.io/kwok"
KWOK_VERSION = "v0.8.0"

KARPENTER_MODULE = "sigs.k8s.io/karpenter"
KARPENTER_VERSION = "v1.8.0"
"""Karpenter with its kwok cloud provider (package `sigs.k8s.io/karpenter/kwok`): a real node
autoscaler for the e2e tests of startup gates, built only for the tests that use it."""


@dataclass(frozen=True)
class KubeRelease:
    """A Kubernetes tag split the way `-ldflags -X` and the staging modules need it."""

    version: str

    @property
    def major(self) -> str:
        """`1` for v1.36.3: what /version reports as `major`."""
        return self.version.removeprefix("v").split(".")[0]

    @property
    def minor(self) -> str:
        """`36` for v1.36.3: what /version reports as `minor`."""
        return self.version.removeprefix("v").split(".")[1]

    @property
    def staging_version(self) -> str:
        """`v0.36.3` for v1.36.3: the tag of every published k8s.io staging module."""
        _, minor, patch = self.version.removeprefix("v").split(".")
        return f"v0.{minor}.{patch}"


KUBERNETES = KubeRelease(KUBERNETES_VERSION)

PROMETHEUS_MODULE = "github.com/prometheus/prometheus"
PROMETHEUS_VERSION = "v0.316.0"
"""Prometheus 3.16.0: its Go module is tagged v0.<minor>.<patch> (`VERSION` in the module says
3.16.0). Only `cmd/promtool` is built, to test the shipped alerts (`promtool test rules`)."""
PROMETHEUS_RELEASE = "3.16.0"
"""What `promtool --version` reports (the module's VERSION file)."""

HELM_MODULE = "helm.sh/helm/v3"
HELM_VERSION = "v3.22.0"
"""Helm 3.22.0, the newest v3 release on the Go module proxy: `cmd/helm` is built to lint, render
and package the chart (charts/nodegate) in the tests (`make helm`)."""
HELM4_MODULE = "helm.sh/helm/v4"
HELM4_VERSION = "v4.3.1"
"""Helm 4.3.1, the newest v4 release on the Go module proxy: the chart is also linted, rendered
and installed with it (server-side apply by default), `make helm`."""
HELM_UNITTEST_MODULE = "github.com/helm-unittest/helm-unittest"
HELM_UNITTEST_VERSION = "v1.1.2"
"""helm-unittest 1.1.2, the one version on the Go module proxy: `cmd/helm-unittest` runs the
chart's unit tests (charts/nodegate/tests). Its go.mod replaces a dependency, so it is built from
a wrapper module that copies that replace (`go install` refuses such modules)."""
CHART_TESTING_MODULE = "github.com/helm/chart-testing/v3"
CHART_TESTING_VERSION = "v3.14.0"
"""chart-testing (`ct`) 3.14.0: the proxy refuses the module's version list (403), so
`go install ...@latest` cannot resolve, and `go install ...@v3.14.0` fails loading its
deprecation (the same list); the version itself is served, and a wrapper module builds it. `ct
lint` runs on the chart in the tests; its config files (etc/chart_schema.yaml, lintconf.yaml)
are copied from the module beside the binary."""
HELM_KUBE_MINOR = "37"
"""The Kubernetes minor of helm's client-go (v0.37.0): helm's Makefile stamps it into
`helm lint`'s and `.Capabilities`' default Kubernetes version (1.37)."""

PULUMI_PKG_MODULE = "github.com/pulumi/pulumi/pkg/v3"
PULUMI_SDK_MODULE = "github.com/pulumi/pulumi/sdk/v3"
PULUMI_VERSION = "v3.274.1"
"""The Pulumi engine (`pkg/v3/cmd/pulumi`), built from pkg/v3 and sdk/v3 at this version in a
wrapper module that copies pkg/v3's versioned replace (atotto/clipboard => tgummerer/clipboard;
its `sdk/v3 => ../sdk` replace is local and becomes a require). Its go.mod needs Go >= 1.26.6."""
PULUMI_PYTHON_HOST_VERSION = "v3.68.0"
"""The Python language host, `sdk/v3/python/cmd/pulumi-language-python`: the newest sdk/v3 that
still holds it (later it is a module of its own, which the proxy refuses). It runs programs
under the newer engine; `pulumi-language-python-exec` comes from the same module's source."""
PULUMI_KUBERNETES_MODULE = "github.com/pulumi/pulumi-kubernetes/provider/v4"
PULUMI_KUBERNETES_VERSION = "v4.0.0-20260115033456-f47bc2d6f199"
"""The only version of the Kubernetes provider's module the proxy lists (a pseudo-version: the
provider's tags are not module tags)."""
PULUMI_KUBERNETES_RELEASE = "4.25.0"
"""The provider release that commit is (2026-01-15; crd2pulumi's move to v4.25.0 on 2026-01-21
pins this pseudo-version): stamped into the binary, its plugin version, and the version of the
PyPI `pulumi-kubernetes` SDK that programs run with (the SDK asks the engine for exactly it)."""
