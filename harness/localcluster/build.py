"""Build and cache the control-plane binaries: `python -m nodegate.localcluster.build`.

Nothing prebuilt can be downloaded here (only module proxies are reachable), so etcd,
kube-apiserver, kube-scheduler, kube-controller-manager and kwok are compiled from their Go
modules. That takes minutes cold, so the result is cached per Kubernetes version outside the
clone, and a warm call only checks a stamp file.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path

from nodegate.localcluster import debpackage, gomodule, paths
from nodegate.localcluster.gotool import Say, go_output, run_go
from nodegate.localcluster.versions import (
    CHART_TESTING_MODULE,
    CHART_TESTING_VERSION,
    ETCD_MODULE,
    ETCD_VERSION,
    HELM4_MODULE,
    HELM4_VERSION,
    HELM_KUBE_MINOR,
    HELM_MODULE,
    HELM_UNITTEST_MODULE,
    HELM_UNITTEST_VERSION,
    HELM_VERSION,
    KARPENTER_MODULE,
    KARPENTER_VERSION,
    KUBERNETES,
    KUBERNETES_MODULE,
    KWOK_MODULE,
    KWOK_VERSION,
    PROMETHEUS_MODULE,
    PROMETHEUS_RELEASE,
    PROMETHEUS_VERSION,
    PULUMI_PKG_MODULE,
    PULUMI_PYTHON_HOST_VERSION,
    PULUMI_SDK_MODULE,
    PULUMI_VERSION,
)

KUBE_COMMANDS = (paths.KUBE_APISERVER, paths.KUBE_SCHEDULER, paths.KUBE_CONTROLLER_MANAGER)
# Only these Stage sets are used: nodes turn Ready and renew Leases, pods turn Ready.
KWOK_STAGE_SETS = ("node/fast", "node/heartbeat-with-lease", "pod/fast")


def expected_stamp() -> dict[str, str]:
    """What the stamp records; a mismatch (e.g. an etcd bump) triggers a rebuild."""
    return {
        "kubernetes": KUBERNETES.version,
        "etcd": ETCD_VERSION,
        "kwok": KWOK_VERSION,
        "stages": ",".join(KWOK_STAGE_SETS),
    }


def is_built() -> bool:
    """True when the cached bin/ is complete for the pinned versions."""
    stamp = paths.bin_dir() / paths.STAMP_NAME
    try:
        recorded = json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if recorded != expected_stamp():
        return False
    return all(paths.binary(name).is_file() for name in paths.ALL_BINARIES)


def ensure_built(say: Say | None = None, *, force: bool = False) -> Path:
    """Return the bin/ directory, building everything first if the cache is cold.

    Safe to call from several processes at once (`make test` builds, then pytest calls it
    again): a file lock serialises builders and the loser finds the stamp already written.
    """
    out: Say = say or _print_flushed
    if not force and is_built():
        return paths.bin_dir()
    paths.version_dir().mkdir(parents=True, exist_ok=True)
    with _build_lock():
        if not force and is_built():
            return paths.bin_dir()
        _build_all(out)
    return paths.bin_dir()


@contextlib.contextmanager
def _build_lock(root: Path | None = None) -> Iterator[None]:
    """An exclusive flock on `<root>/.lock` (root: the control plane's version dir unless
    given), released even when the build fails."""
    with ((root or paths.version_dir()) / ".lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _ensure_cached(
    say: Say | None,
    label: str,
    is_built: Callable[[], bool],
    root: Path | None,
    build: Callable[[Path, Say], None],
    result: Path,
) -> Path:
    """`result`, building it first if its cache is cold: the step every cached tool shares.
    Checked without the lock, then again under `root`'s lock (another process may have built it
    meanwhile); `build` stages and renames into place, so a failed build leaves no stamp."""
    if not is_built():
        (root or paths.version_dir()).mkdir(parents=True, exist_ok=True)
        with _build_lock(root):
            if not is_built():
                _timed(say or _print_flushed, label, build, Path())
    return result


def _build_all(say: Say) -> None:
    """Build every binary into a temporary bin dir, stamp it, then rename it into place."""
    root = paths.version_dir()
    staging = root / f"bin.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    say(f"building the control plane {KUBERNETES.version} into {paths.bin_dir()} (cold cache)")
    total_started = time.monotonic()
    try:
        _timed(say, "kube-apiserver, kube-scheduler, kube-controller-manager", _build_kube, staging)
        _timed(say, "etcd", _build_etcd, staging)
        _timed(say, "kwok", _build_kwok, staging)
        (staging / paths.STAMP_NAME).write_text(
            json.dumps(expected_stamp(), indent=2) + "\n", encoding="utf-8"
        )
        final = paths.bin_dir()
        if final.exists():
            shutil.rmtree(final)
        staging.rename(final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    say(f"control plane built in {time.monotonic() - total_started:.0f}s")


def _timed(say: Say, label: str, step: Callable[[Path, Say], None], staging: Path) -> None:
    """Run one build step with start/end lines that carry its elapsed seconds."""
    say(f"- {label}: building")
    started = time.monotonic()
    step(staging, say)
    say(f"- {label}: done in {time.monotonic() - started:.0f}s")


def _module_dir(name: str, root: Path | None = None) -> Path:
    """The wrapper module's directory, kept between runs so a retry reuses its go.sum (under the
    control plane's version dir unless `root` is given)."""
    directory = (root or paths.version_dir()) / "modules" / name
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def _download(module: str, version: str, cwd: Path) -> tuple[str, Path]:
    """Download one module: its go.mod text and its unpacked source dir."""
    info = json.loads(go_output(["mod", "download", "-json", f"{module}@{version}"], cwd=cwd))
    return Path(info["GoMod"]).read_text(encoding="utf-8"), Path(info["Dir"])


def _upstream(module: str, version: str, cwd: Path) -> tuple[gomodule.UpstreamGoMod, Path]:
    """Download one module and parse its go.mod; also return its unpacked source dir."""
    text, source = _download(module, version, cwd)
    return gomodule.parse_upstream_gomod(text), source


def _plain_module(
    name: str, module: str, version: str, root: Path | None = None, *, keep_replaces: bool = False
) -> tuple[Path, Path]:
    """The wrapper module every tool but Kubernetes builds from (one require, upstream's Go
    version; `keep_replaces`: its versioned replaces too, which `go install` refuses): the
    wrapper's directory and the module's unpacked source."""
    directory = _module_dir(name, root)
    text, source = _download(module, version, directory)
    upstream = gomodule.parse_upstream_gomod(text)
    wrapper = gomodule.plain_wrapper(name, upstream.go_version, module, version)
    if keep_replaces:
        wrapper = dataclasses.replace(wrapper, replace_lines=gomodule.versioned_replaces(text))
    _write_gomod(directory, wrapper)
    return directory, source


def _write_gomod(directory: Path, wrapper: gomodule.WrapperModule) -> None:
    """(Re)write go.mod only when it changed, so an interrupted build keeps its go.sum."""
    gomod = directory / "go.mod"
    text = wrapper.render()
    if (
        not gomod.exists()
        or not (directory / ".rendered").exists()
        or ((directory / ".rendered").read_text(encoding="utf-8") != text)
    ):
        gomod.write_text(text, encoding="utf-8")
        (directory / ".rendered").write_text(text, encoding="utf-8")
        (directory / "go.sum").unlink(missing_ok=True)


def _go_build(
    directory: Path,
    packages: list[str],
    *,
    output: str,
    ldflags: str,
    label: str,
    say: Say,
    root: Path | None = None,
) -> None:
    """`go get` the packages (resolves and downloads modules), then `go build` them.

    `output` is a file path for one package, or a directory ending in `/` for several; the logs
    go under `root` (the control plane's version dir unless given).
    """
    logs = (root or paths.version_dir()) / "logs"
    pinned = [f"{package}@{version}" for package, version in _pins(packages)]
    if pinned:  # only the module's own packages (`./...`): `-mod=mod` resolves while compiling
        say(f"  {label}: resolving and downloading modules")
        started = time.monotonic()
        run_go(
            ["get", *pinned],
            cwd=directory,
            log_path=logs / f"{label}-get.log",
            label=label,
            say=say,
        )
        say(f"  {label}: modules ready in {time.monotonic() - started:.0f}s; compiling")
    else:
        say(f"  {label}: compiling (modules resolve as they are needed)")
    run_go(
        [
            "build",
            "-v",
            "-mod=mod",
            "-trimpath",
            "-ldflags",
            ldflags,
            "-o",
            output,
            *packages,
        ],
        cwd=directory,
        log_path=logs / f"{label}-build.log",
        label=label,
        say=say,
    )


def _pins(packages: list[str]) -> list[tuple[str, str]]:
    """Each package with the version of the module it comes from (go get needs @version)."""
    versions = {
        KUBERNETES_MODULE: KUBERNETES.version,
        ETCD_MODULE: ETCD_VERSION,
        KWOK_MODULE: KWOK_VERSION,
        KARPENTER_MODULE: KARPENTER_VERSION,
        PROMETHEUS_MODULE: PROMETHEUS_VERSION,
        HELM_MODULE: HELM_VERSION,
        HELM4_MODULE: HELM4_VERSION,
        HELM_UNITTEST_MODULE: HELM_UNITTEST_VERSION,
        CHART_TESTING_MODULE: CHART_TESTING_VERSION,
        PULUMI_PKG_MODULE: PULUMI_VERSION,
        # sdk/v3 is only ever built from for the Python language host; the engine's sdk/v3 is
        # the wrapper's require, at PULUMI_VERSION.
        PULUMI_SDK_MODULE: PULUMI_PYTHON_HOST_VERSION,
    }
    pinned = []
    for package in packages:
        if package.startswith("./"):  # a package of the wrapper module itself: nothing to get
            continue
        module = next(m for m in versions if package == m or package.startswith(m + "/"))
        pinned.append((package, versions[module]))
    return pinned


def _kube_ldflags() -> str:
    """Version stamps as Kubernetes' own hack/lib/version.sh sets them, for both packages.

    Without them the server reports `v0.0.0-master` and clients that parse versions break.
    """
    values = {
        "gitVersion": KUBERNETES.version,
        "gitMajor": KUBERNETES.major,
        "gitMinor": KUBERNETES.minor,
    }
    flags = ["-s", "-w"]
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {package}.{key}={value}" for key, value in values.items()]
    return " ".join(flags)


def _build_kube(staging: Path, say: Say) -> None:
    """All three Kubernetes commands in ONE `go build`, so shared packages compile once."""
    directory = _module_dir("kubernetes")
    upstream, _ = _upstream(KUBERNETES_MODULE, KUBERNETES.version, directory)
    wrapper = gomodule.kubernetes_wrapper(upstream, KUBERNETES.version, KUBERNETES.staging_version)
    _write_gomod(directory, wrapper)
    packages = [f"{KUBERNETES_MODULE}/cmd/{command}" for command in KUBE_COMMANDS]
    _go_build(
        directory,
        packages,
        output=f"{staging}/",
        ldflags=_kube_ldflags(),
        label="kubernetes",
        say=say,
    )


def _build_etcd(staging: Path, say: Say) -> None:
    """etcd's server module has `main` at its root, so the package is the module path."""
    directory, _ = _plain_module("etcd", ETCD_MODULE, ETCD_VERSION)
    _go_build(
        directory,
        [ETCD_MODULE],
        output=str(staging / paths.ETCD),
        ldflags="-s -w",
        label="etcd",
        say=say,
    )


def _build_kwok(staging: Path, say: Say) -> None:
    """kwok plus the Stage YAMLs it needs at run time, copied out of its module source."""
    directory, source = _plain_module("kwok", KWOK_MODULE, KWOK_VERSION)
    ldflags = (
        f"-s -w -X {KWOK_MODULE}/pkg/consts.Version={KWOK_VERSION.removeprefix('v')}"
        f" -X {KWOK_MODULE}/pkg/consts.KubeVersion={KUBERNETES.version.removeprefix('v')}"
    )
    _go_build(
        directory,
        [f"{KWOK_MODULE}/cmd/kwok"],
        output=str(staging / paths.KWOK),
        ldflags=ldflags,
        label="kwok",
        say=say,
    )
    stages = paths.kwok_stages_dir(staging)
    stages.mkdir()
    for stage_set in KWOK_STAGE_SETS:
        for yaml_file in sorted((source / "kustomize" / "stage" / stage_set).glob("*.yaml")):
            if yaml_file.name == "kustomization.yaml":
                continue
            target = stages / f"{stage_set.replace('/', '-')}-{yaml_file.name}"
            target.write_bytes(yaml_file.read_bytes())


KARPENTER_CRD_DIRS = ("kwok/charts/crds", "kwok/apis/crds")
"""Where the module ships the CRDs Karpenter's kwok provider needs (NodePool, NodeClaim,
NodeOverlay, KWOKNodeClass, ...); a file name in both is the same CRD, copied once."""


def karpenter_stamp() -> dict[str, str]:
    return {"karpenter": KARPENTER_VERSION, "package": f"{KARPENTER_MODULE}/kwok"}


def karpenter_is_built() -> bool:
    """True when Karpenter's kwok provider and its CRDs are cached for the pinned version."""
    root = paths.karpenter_dir()
    try:
        recorded = json.loads((root / paths.STAMP_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    crds = root / paths.KARPENTER_CRDS_DIR
    return (
        recorded == karpenter_stamp()
        and (root / paths.KARPENTER_KWOK).is_file()
        and any(crds.glob("*.yaml"))
    )


def ensure_karpenter_built(say: Say | None = None) -> Path:
    """Karpenter's directory (binary and crds/), building it first if the cache is cold.

    Kept out of `ensure_built`: only the tests that run Karpenter pay for it. Same lock, same
    build-then-rename as the control plane."""
    return _ensure_cached(
        say,
        f"karpenter kwok provider {KARPENTER_VERSION}",
        karpenter_is_built,
        None,
        _build_karpenter,
        paths.karpenter_dir(),
    )


def _build_karpenter(_: Path, say: Say) -> None:
    """`go build sigs.k8s.io/karpenter/kwok` from the module (no replace directives), plus the
    CRDs copied out of the module source, into a staging dir renamed into place."""

    def fill(staging: Path) -> None:
        (staging / paths.KARPENTER_CRDS_DIR).mkdir()
        directory, source = _plain_module("karpenter", KARPENTER_MODULE, KARPENTER_VERSION)
        _go_build(
            directory,
            [f"{KARPENTER_MODULE}/kwok"],
            output=str(staging / paths.KARPENTER_KWOK),
            ldflags="-s -w",
            label="karpenter",
            say=say,
        )
        for crd_dir in KARPENTER_CRD_DIRS:
            for crd in sorted((source / crd_dir).glob("*.yaml")):
                target = staging / paths.KARPENTER_CRDS_DIR / crd.name
                if not target.exists():
                    target.write_bytes(crd.read_bytes())

    _build_staged(paths.karpenter_dir(), karpenter_stamp(), fill)


def kubelet_stamp() -> dict[str, str]:
    """What kubelet's own stamp records: its Kubernetes version and the fake CRI's source, so
    an edit of fakecri/main.go rebuilds both (never the control plane, which has its own)."""
    return {
        "kubelet": KUBERNETES.version,
        "fakecri": hashlib.sha256(_fake_cri_source()).hexdigest(),
    }


def kubelet_is_built() -> bool:
    """True when kubelet and the fake CRI are cached for the pinned version and source."""
    return _is_stamped(paths.kubelet_dir(), kubelet_stamp(), paths.KUBELET_BINARIES)


def ensure_kubelet_built(say: Say | None = None) -> Path:
    """The kubelet directory (kubelet, fakecri), building it first if the cache is cold.

    Kept out of `ensure_built` (only the real-kubelet tests need it) and stamped apart from
    bin/, so another engineer's control-plane cache check never sees it. Same lock, same
    build-then-rename as the control plane."""
    return _ensure_cached(
        say,
        f"kubelet {KUBERNETES.version} and fakecri",
        kubelet_is_built,
        None,
        _build_kubelet,
        paths.kubelet_dir(),
    )


def _fake_cri_source() -> bytes:
    """fakecri/main.go, shipped beside this module: a CRI server over k8s.io/cri-client's fake."""
    return (resources.files("nodegate.localcluster") / "fakecri" / "main.go").read_bytes()


def _build_kubelet(_: Path, say: Say) -> None:
    """kubelet and fakecri in ONE `go build` in a wrapper module with the control plane's pins
    (its own directory, same Go build cache: warm, only kubelet's own packages compile)."""

    def fill(staging: Path) -> None:
        directory = _module_dir("kubelet")
        upstream, _ = _upstream(KUBERNETES_MODULE, KUBERNETES.version, directory)
        wrapper = gomodule.kubernetes_wrapper(
            upstream, KUBERNETES.version, KUBERNETES.staging_version, name="kubelet"
        )
        _write_gomod(directory, wrapper)
        (directory / paths.FAKE_CRI).mkdir(exist_ok=True)
        (directory / paths.FAKE_CRI / "main.go").write_bytes(_fake_cri_source())
        _go_build(
            directory,
            [f"{KUBERNETES_MODULE}/cmd/{paths.KUBELET}", f"./{paths.FAKE_CRI}"],
            output=f"{staging}/",
            ldflags=_kube_ldflags(),
            label="kubelet",
            say=say,
        )

    _build_staged(paths.kubelet_dir(), kubelet_stamp(), fill)


def kubectl_stamp() -> dict[str, str]:
    """What kubectl's own stamp records: its Kubernetes version and package."""
    return {"kubectl": KUBERNETES.version, "package": f"{KUBERNETES_MODULE}/cmd/kubectl"}


def kubectl_is_built() -> bool:
    """True when kubectl is cached for the pinned Kubernetes version."""
    return _is_stamped(paths.kubectl_dir(), kubectl_stamp(), (paths.KUBECTL,))


def ensure_kubectl_built(say: Say | None = None) -> Path:
    """The cached kubectl binary, building it first if the cache is cold.

    The kubectl-plugin tests (tests/e2e/test_day2_kubectl_plugin.py) run `kubectl nodegate ...`
    through it. Kept out of `ensure_built` and stamped apart from bin/ (like kubelet), so adding
    it never invalidates the control plane's cache; Go's build cache is shared, so after the
    control plane only kubectl's own packages compile. Same lock, same build-then-rename."""
    return _ensure_cached(
        say,
        f"kubectl {KUBERNETES.version}",
        kubectl_is_built,
        None,
        _build_kubectl,
        paths.kubectl_binary(),
    )


def _build_kubectl(_: Path, say: Say) -> None:
    """`go build k8s.io/kubernetes/cmd/kubectl` in a wrapper module with the control plane's
    pins (its own directory, so the control plane's go.mod is never touched)."""

    def fill(staging: Path) -> None:
        directory = _module_dir("kubectl")
        upstream, _ = _upstream(KUBERNETES_MODULE, KUBERNETES.version, directory)
        wrapper = gomodule.kubernetes_wrapper(
            upstream, KUBERNETES.version, KUBERNETES.staging_version, name="kubectl"
        )
        _write_gomod(directory, wrapper)
        _go_build(
            directory,
            [f"{KUBERNETES_MODULE}/cmd/{paths.KUBECTL}"],
            output=str(staging / paths.KUBECTL),
            ldflags=_kube_ldflags(),
            label="kubectl",
            say=say,
        )

    _build_staged(paths.kubectl_dir(), kubectl_stamp(), fill)


def _is_stamped(root: Path, stamp: dict[str, str], files: tuple[str, ...]) -> bool:
    """True when `root` holds `files` and a stamp equal to `stamp`."""
    try:
        recorded = json.loads((root / paths.STAMP_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return recorded == stamp and all((root / name).is_file() for name in files)


def _build_staged(final: Path, stamp: dict[str, str], fill: Callable[[Path], None]) -> None:
    """`fill` a staging directory beside `final`, stamp it, then rename it into place: a reader
    sees the old complete directory or the new one, never half of one."""
    staging = final.parent / f"{final.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        fill(staging)
        (staging / paths.STAMP_NAME).write_text(
            json.dumps(stamp, indent=2) + "\n", encoding="utf-8"
        )
        if final.exists():
            shutil.rmtree(final)
        staging.rename(final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def promtool_stamp() -> dict[str, str]:
    return {"prometheus": PROMETHEUS_VERSION, "package": f"{PROMETHEUS_MODULE}/cmd/promtool"}


def promtool_is_built() -> bool:
    """True when promtool is cached for the pinned Prometheus version."""
    return _is_stamped(paths.promtool_dir(), promtool_stamp(), (paths.PROMTOOL,))


def ensure_promtool_built(say: Say | None = None) -> Path:
    """The cached promtool binary, building it first if the cache is cold.

    The alert tests (tests/unit/manifests/test_alerts_promtool.py) run it. Its directory, stamp
    and lock are its own (`<cache>/promtool/<version>`), so it never touches the control
    plane's; the Go build cache is shared. Same build-then-rename as the control plane."""
    return _ensure_cached(
        say,
        f"promtool {PROMETHEUS_RELEASE}",
        promtool_is_built,
        paths.promtool_root(),
        _build_promtool,
        paths.promtool_binary(),
    )


def _build_promtool(_: Path, say: Say) -> None:
    """`go build github.com/prometheus/prometheus/cmd/promtool` from the module (no replace
    directives), with the version stamps Prometheus's own build (promu) sets."""

    def fill(staging: Path) -> None:
        root = paths.promtool_root()
        directory, _ = _plain_module("prometheus", PROMETHEUS_MODULE, PROMETHEUS_VERSION, root)
        common = "github.com/prometheus/common/version"
        _go_build(
            directory,
            [f"{PROMETHEUS_MODULE}/cmd/promtool"],
            output=str(staging / paths.PROMTOOL),
            ldflags=(
                f"-s -w -X {common}.Version={PROMETHEUS_RELEASE}"
                f" -X {common}.Revision={PROMETHEUS_VERSION} -X {common}.Branch=module"
            ),
            label="promtool",
            say=say,
            root=root,
        )

    _build_staged(paths.promtool_dir(), promtool_stamp(), fill)


PROMTOOL_FROM_DEBIAN = debpackage.DebianFile("prometheus", "/usr/bin/promtool", minimum=(2, 42))
"""Debian bookworm's prometheus 2.42 passes every alert test (check rules --lint=all, test
rules): the rule files and test format the tests use are the same in 2.42 and 3.16."""


def ensure_promtool(say: Say | None = None) -> Path:
    """promtool for the alert tests, from its cheapest honest source: Debian's `prometheus`
    package where apt answers (seconds), else built from the Go module (about 11 minutes cold
    on 2 cores)."""
    if debpackage.apt_available():
        return ensure_debian_promtool(say)
    return ensure_promtool_built(say)


def debian_promtool_is_cached() -> bool:
    """True when a promtool from a new enough Debian package is cached."""
    directory = paths.debian_promtool_dir()
    try:
        recorded = json.loads((directory / paths.STAMP_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        isinstance(recorded, dict)
        and recorded.get("debian-package") == PROMTOOL_FROM_DEBIAN.package
        and debpackage.new_enough(str(recorded.get("version", "")), PROMTOOL_FROM_DEBIAN)
        and (directory / paths.PROMTOOL).is_file()
    )


def ensure_debian_promtool(say: Say | None = None) -> Path:
    """The cached promtool out of Debian's package, fetched (never installed) if cold."""
    return _ensure_cached(
        say,
        f"promtool from Debian's {PROMTOOL_FROM_DEBIAN.package} package",
        debian_promtool_is_cached,
        paths.debian_promtool_dir().parent,
        _fetch_debian_promtool,
        paths.debian_promtool_dir() / paths.PROMTOOL,
    )


def _fetch_debian_promtool(_: Path, say: Say) -> None:
    version = debpackage.resolve(PROMTOOL_FROM_DEBIAN, is_root=os.geteuid() == 0)
    _build_staged(
        paths.debian_promtool_dir(),
        {"debian-package": PROMTOOL_FROM_DEBIAN.package, "version": version},
        lambda staging: debpackage.extract(
            PROMTOOL_FROM_DEBIAN, version, staging / paths.PROMTOOL, say
        ),
    )


HELM_MODULES = {HELM_VERSION: HELM_MODULE, HELM4_VERSION: HELM4_MODULE}
"""The helm releases the chart tests run: v3 and v4, each with its module."""


def helm_stamp(version: str = HELM_VERSION) -> dict[str, str]:
    return {"helm": version, "package": f"{HELM_MODULES[version]}/cmd/helm"}


def helm_is_built(version: str = HELM_VERSION) -> bool:
    """True when helm is cached for the pinned version."""
    return _is_stamped(paths.helm_dir(version), helm_stamp(version), (paths.HELM,))


def ensure_helm_built(say: Say | None = None, version: str = HELM_VERSION) -> Path:
    """The cached helm binary of `version` (v3 by default, or HELM4_VERSION), building it first
    if the cache is cold.

    The chart tests (tests/unit/manifests/test_chart_helm.py) run it. Its directory, stamp and
    lock are its own (`<cache>/helm/<version>`), so it never touches the control plane's; the Go
    build cache is shared. Same build-then-rename as the control plane."""
    return _ensure_cached(
        say,
        f"helm {version}",
        lambda: helm_is_built(version),
        paths.helm_root(version),
        lambda _, s: _build_helm(version, s),
        paths.helm_binary(version),
    )


def _build_helm(version: str, say: Say) -> None:
    """`go build helm.sh/helm/v<major>/cmd/helm` from the module (no replace directives), with
    the version stamps helm's own Makefile sets (v3 also stamps its Kubernetes version)."""
    module = HELM_MODULES[version]

    def fill(staging: Path) -> None:
        root = paths.helm_root(version)
        directory, _ = _plain_module("helm", module, version, root)
        stamps = f"-X {module}/internal/version.version={version}"
        stamps += f" -X {module}/internal/version.gitTreeState=module"
        if module == HELM_MODULE:
            for package in ("pkg/lint/rules", "pkg/chartutil"):
                stamps += f" -X {module}/{package}.k8sVersionMajor=1"
                stamps += f" -X {module}/{package}.k8sVersionMinor={HELM_KUBE_MINOR}"
        _go_build(
            directory,
            [f"{module}/cmd/helm"],
            output=str(staging / paths.HELM),
            ldflags=f"-s -w {stamps}",
            label="helm",
            say=say,
            root=root,
        )

    _build_staged(paths.helm_dir(version), helm_stamp(version), fill)


def helm_unittest_stamp() -> dict[str, str]:
    return {
        "helm-unittest": HELM_UNITTEST_VERSION,
        "package": f"{HELM_UNITTEST_MODULE}/cmd/helm-unittest",
    }


def helm_unittest_is_built() -> bool:
    directory = paths.helm_unittest_binary().parent
    return _is_stamped(directory, helm_unittest_stamp(), (paths.HELM_UNITTEST,))


def ensure_helm_unittest_built(say: Say | None = None) -> Path:
    """The cached helm-unittest binary (the chart's unit tests, charts/nodegate/tests), built
    first if the cache is cold; its own directory, stamp and lock, like helm's."""
    return _ensure_cached(
        say,
        f"helm-unittest {HELM_UNITTEST_VERSION}",
        helm_unittest_is_built,
        paths.helm_unittest_root(),
        _build_helm_unittest,
        paths.helm_unittest_binary(),
    )


def _build_helm_unittest(_: Path, say: Say) -> None:
    """`go build .../cmd/helm-unittest` from a wrapper module that copies the upstream go.mod's
    one replace (`go install module@version` refuses a module with replaces)."""

    def fill(staging: Path) -> None:
        root = paths.helm_unittest_root()
        directory, _ = _plain_module(
            "helm-unittest", HELM_UNITTEST_MODULE, HELM_UNITTEST_VERSION, root, keep_replaces=True
        )
        _go_build(
            directory,
            [f"{HELM_UNITTEST_MODULE}/cmd/helm-unittest"],
            output=str(staging / paths.HELM_UNITTEST),
            ldflags="-s -w",
            label="helm-unittest",
            say=say,
            root=root,
        )

    _build_staged(paths.helm_unittest_binary().parent, helm_unittest_stamp(), fill)


def chart_testing_stamp() -> dict[str, str]:
    return {"chart-testing": CHART_TESTING_VERSION, "package": f"{CHART_TESTING_MODULE}/ct"}


def chart_testing_is_built() -> bool:
    directory = paths.chart_testing_binary().parent
    files = (paths.CHART_TESTING, "etc/chart_schema.yaml", "etc/lintconf.yaml")
    return _is_stamped(directory, chart_testing_stamp(), files)


def ensure_chart_testing_built(say: Say | None = None) -> Path:
    """The cached `ct` binary (its config in `paths.chart_testing_config()`), built first if
    the cache is cold; its own directory, stamp and lock, like helm's."""
    return _ensure_cached(
        say,
        f"chart-testing {CHART_TESTING_VERSION}",
        chart_testing_is_built,
        paths.chart_testing_root(),
        _build_chart_testing,
        paths.chart_testing_binary(),
    )


def _build_chart_testing(_: Path, say: Say) -> None:
    """`go build github.com/helm/chart-testing/v3/ct` in a wrapper module (see versions.py for
    why not `go install`), and its etc/ config files copied from the module's source."""

    def fill(staging: Path) -> None:
        root = paths.chart_testing_root()
        directory, source = _plain_module(
            "chart-testing", CHART_TESTING_MODULE, CHART_TESTING_VERSION, root
        )
        version = f"-X {CHART_TESTING_MODULE}/ct/cmd.Version={CHART_TESTING_VERSION}"
        _go_build(
            directory,
            [f"{CHART_TESTING_MODULE}/ct"],
            output=str(staging / paths.CHART_TESTING),
            ldflags=f"-s -w {version}",
            label="chart-testing",
            say=say,
            root=root,
        )
        (staging / "etc").mkdir()
        for name in ("chart_schema.yaml", "lintconf.yaml"):
            shutil.copyfile(source / "etc" / name, staging / "etc" / name)

    _build_staged(paths.chart_testing_binary().parent, chart_testing_stamp(), fill)


def ensure_chart_tools_built(say: Say | None = None) -> Path:
    """helm v3 and v4, helm-unittest and ct, each cached on its own (`make helm`); helm v3's
    path."""
    ensure_helm_built(say, HELM4_VERSION)
    ensure_helm_unittest_built(say)
    ensure_chart_testing_built(say)
    return ensure_helm_built(say)


def _print_flushed(line: str) -> None:
    """Progress must appear while the build runs, even when stdout is a pipe (CI logs)."""
    print(line, flush=True)


def main(argv: list[str] | None = None) -> int:
    """CLI: build if needed and print the bin directory; `--force` rebuilds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--force", action="store_true", help="rebuild even if cached")
    parser.add_argument(
        "--karpenter",
        action="store_true",
        help="build Karpenter's kwok provider (only its e2e tests need it) instead",
    )
    parser.add_argument(
        "--kubelet",
        action="store_true",
        help="build kubelet and the fake CRI (only the real-kubelet e2e tests need them) instead",
    )
    parser.add_argument(
        "--kubectl",
        action="store_true",
        help="build kubectl (the kubectl-plugin tests run it) instead",
    )
    parser.add_argument(
        "--promtool",
        action="store_true",
        help="fetch (Debian) or build (Go module) promtool, which the alert tests run, instead",
    )
    parser.add_argument(
        "--helm",
        action="store_true",
        help="build helm v3 and v4, helm-unittest and ct (the chart tests run them) instead",
    )
    args = parser.parse_args(argv)
    started = time.monotonic()

    def took() -> str:
        return f"{time.monotonic() - started:.2f}s"

    if args.helm:
        return _report(
            "helm",
            ensure_chart_tools_built,
            lambda directory: (
                f"helm {HELM_VERSION} and {HELM4_VERSION}, helm-unittest "
                f"{HELM_UNITTEST_VERSION}, chart-testing {CHART_TESTING_VERSION} ready ({took()})"
            ),
        )
    if args.promtool:
        return _report(
            "promtool",
            ensure_promtool,
            lambda binary: f"promtool ready at {binary} ({took()})",
        )
    if args.kubectl:
        return _report(
            "kubectl",
            ensure_kubectl_built,
            lambda binary: f"kubectl {KUBERNETES.version} ready at {binary} ({took()})",
        )
    if args.kubelet:
        return _report(
            "kubelet",
            ensure_kubelet_built,
            lambda directory: f"kubelet {KUBERNETES.version} ready in {directory} ({took()})",
        )
    if args.karpenter:
        return _report(
            "karpenter",
            ensure_karpenter_built,
            lambda directory: f"karpenter {KARPENTER_VERSION} ready in {directory}",
        )
    return _report(
        "control-plane",
        lambda: ensure_built(force=args.force),
        lambda directory: f"control plane {KUBERNETES.version} ready in {directory} ({took()})",
    )


def _report(what: str, build: Callable[[], Path], ready: Callable[[Path], str]) -> int:
    """Run one build for the CLI: its readiness line, or its failure said readably (exit 1)."""
    try:
        result = build()
    except Exception as error:  # the CLI's whole job is to report a failed build readably
        print(f"{what} build failed: {error}", file=sys.stderr, flush=True)
        return 1
    _print_flushed(ready(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
