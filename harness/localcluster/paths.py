"""Where the control-plane binaries are cached.

They take minutes to build, so they live outside the clone, keyed by Kubernetes version: a fresh
clone, `make clean` or a branch switch reuses them, and a version bump builds a new set beside
the old one.
"""

from __future__ import annotations

import os
from pathlib import Path

from nodegate.localcluster.versions import (
    CHART_TESTING_VERSION,
    HELM_UNITTEST_VERSION,
    HELM_VERSION,
    KARPENTER_VERSION,
    KUBERNETES_VERSION,
    PROMETHEUS_VERSION,
    PULUMI_KUBERNETES_RELEASE,
    PULUMI_PYTHON_HOST_VERSION,
    PULUMI_VERSION,
)

ETCD = "etcd"
KUBE_APISERVER = "kube-apiserver"
KUBE_SCHEDULER = "kube-scheduler"
KUBE_CONTROLLER_MANAGER = "kube-controller-manager"
KWOK = "kwok"

ALL_BINARIES = (ETCD, KUBE_APISERVER, KUBE_SCHEDULER, KUBE_CONTROLLER_MANAGER, KWOK)

STAMP_NAME = ".complete"
KWOK_STAGES_DIR = "kwok-stages"


def cache_root() -> Path:
    """`$NODEGATE_CACHE` or `~/.cache/nodegate`: one knob for CI to point at a cached volume."""
    configured = os.environ.get("NODEGATE_CACHE")
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "nodegate"


def version_dir(kubernetes_version: str = KUBERNETES_VERSION) -> Path:
    """Everything built for one Kubernetes version: bin/, the wrapper modules, build logs."""
    return cache_root() / "controlplane" / kubernetes_version


def bin_dir(kubernetes_version: str = KUBERNETES_VERSION) -> Path:
    """The directory that only exists once every binary was built (it is renamed into place)."""
    return version_dir(kubernetes_version) / "bin"


def binary(name: str, kubernetes_version: str = KUBERNETES_VERSION) -> Path:
    """Path of one cached binary, e.g. `binary(KUBE_APISERVER)`."""
    return bin_dir(kubernetes_version) / name


def kwok_stages_dir(binaries: Path) -> Path:
    """kwok's Stage YAMLs, copied from its module beside the binaries (`binaries`: `bin_dir()`,
    or the staging directory a build renames into place), so running kwok never needs
    GOMODCACHE."""
    return binaries / KWOK_STAGES_DIR


KARPENTER_KWOK = "karpenter-kwok"
KARPENTER_CRDS_DIR = "crds"


def karpenter_dir(version: str = KARPENTER_VERSION) -> Path:
    """Karpenter's kwok provider and its CRDs: apart from bin/ because only the tests that run
    Karpenter build it (renamed into place when complete, like bin/)."""
    return version_dir() / "karpenter" / version


KUBELET = "kubelet"
FAKE_CRI = "fake-cri"
KUBELET_BINARIES = (KUBELET, FAKE_CRI)


def kubelet_dir(kubernetes_version: str = KUBERNETES_VERSION) -> Path:
    """kubelet and the fake CRI it talks to: apart from bin/, with a stamp of their own, so adding
    or rebuilding them never invalidates the control plane's cache (renamed into place too)."""
    return version_dir(kubernetes_version) / "kubelet"


KUBECTL = "kubectl"


def kubectl_dir(kubernetes_version: str = KUBERNETES_VERSION) -> Path:
    """kubectl, for the kubectl-plugin tests (`kubectl nodegate ...`): apart from bin/, with a
    stamp of its own like kubelet's, so adding it never invalidates the control plane's cache."""
    return version_dir(kubernetes_version) / "kubectl"


def kubectl_binary(kubernetes_version: str = KUBERNETES_VERSION) -> Path:
    """The cached kubectl of the control plane's Kubernetes version."""
    return kubectl_dir(kubernetes_version) / KUBECTL


PROMTOOL = "promtool"


def promtool_root(version: str = PROMETHEUS_VERSION) -> Path:
    """Everything built for one Prometheus version: bin/, its wrapper module, build logs. Beside
    the control plane's directories, not in them: it has nothing to do with a Kubernetes version,
    and its stamp and lock are its own."""
    return cache_root() / "promtool" / version


def promtool_dir(version: str = PROMETHEUS_VERSION) -> Path:
    """promtool and its stamp (renamed into place when complete, like bin/)."""
    return promtool_root(version) / "bin"


def promtool_binary(version: str = PROMETHEUS_VERSION) -> Path:
    """The cached promtool of `version`."""
    return promtool_dir(version) / PROMTOOL


def debian_promtool_dir() -> Path:
    """promtool copied out of Debian's `prometheus` package, with a stamp naming the package
    version (the alert tests' source wherever apt answers; see debpackage.py)."""
    return cache_root() / "promtool" / "debian" / "bin"


HELM = "helm"
HELM_UNITTEST = "helm-unittest"


CHART_TESTING = "ct"


def chart_testing_root(version: str = CHART_TESTING_VERSION) -> Path:
    """ct's bin/ (with its etc/ config beside it), wrapper module and logs."""
    return cache_root() / "chart-testing" / version


def chart_testing_binary(version: str = CHART_TESTING_VERSION) -> Path:
    return chart_testing_root(version) / "bin" / CHART_TESTING


def chart_testing_config(version: str = CHART_TESTING_VERSION) -> Path:
    """What `CT_CONFIG_DIR` names: chart_schema.yaml and lintconf.yaml from the module."""
    return chart_testing_root(version) / "bin" / "etc"


def helm_unittest_root(version: str = HELM_UNITTEST_VERSION) -> Path:
    """helm-unittest's bin/, wrapper module and logs (its own stamp and lock, like helm's)."""
    return cache_root() / "helm-unittest" / version


def helm_unittest_binary(version: str = HELM_UNITTEST_VERSION) -> Path:
    return helm_unittest_root(version) / "bin" / HELM_UNITTEST


def helm_root(version: str = HELM_VERSION) -> Path:
    """Everything built for one helm version: bin/, its wrapper module, build logs. Beside the
    control plane's directories, with its own stamp and lock (like promtool's)."""
    return cache_root() / "helm" / version


def helm_dir(version: str = HELM_VERSION) -> Path:
    """helm and its stamp (renamed into place when complete, like bin/)."""
    return helm_root(version) / "bin"


def helm_binary(version: str = HELM_VERSION) -> Path:
    """The cached helm of `version`."""
    return helm_dir(version) / HELM


PULUMI = "pulumi"
PULUMI_LANGUAGE_PYTHON = "pulumi-language-python"
PULUMI_LANGUAGE_PYTHON_EXEC = "pulumi-language-python-exec"
PULUMI_LANGUAGE_PYTHON_FILES = (PULUMI_LANGUAGE_PYTHON, PULUMI_LANGUAGE_PYTHON_EXEC)
PULUMI_RESOURCE_KUBERNETES = "pulumi-resource-kubernetes"


def pulumi_root(version: str = PULUMI_VERSION) -> Path:
    """The Pulumi engine's bin/, wrapper module and logs (its own stamp and lock, like helm's)."""
    return cache_root() / "pulumi" / version


def pulumi_binary(version: str = PULUMI_VERSION) -> Path:
    return pulumi_root(version) / "bin" / PULUMI


def pulumi_language_python_root(version: str = PULUMI_PYTHON_HOST_VERSION) -> Path:
    """The Python language host's bin/ (host and its -exec script), wrapper module and logs."""
    return cache_root() / "pulumi-language-python" / version


def pulumi_language_python_dir(version: str = PULUMI_PYTHON_HOST_VERSION) -> Path:
    """What goes on PATH for the engine to find the host (renamed into place when complete)."""
    return pulumi_language_python_root(version) / "bin"


def pulumi_kubernetes_root(release: str = PULUMI_KUBERNETES_RELEASE) -> Path:
    """The Kubernetes provider's bin/, its writable copy of the module and logs."""
    return cache_root() / "pulumi-kubernetes" / release


def pulumi_kubernetes_binary(release: str = PULUMI_KUBERNETES_RELEASE) -> Path:
    return pulumi_kubernetes_root(release) / "bin" / PULUMI_RESOURCE_KUBERNETES


def pulumi_home(version: str = PULUMI_VERSION) -> Path:
    """The `PULUMI_HOME` the tests run the engine with: its plugins (the Kubernetes provider,
    installed from the cached binary) and credentials stay in the cache, never in ~/.pulumi."""
    return pulumi_root(version) / "home"
