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
