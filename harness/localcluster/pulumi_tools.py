"""Build and cache the real Pulumi engine, its Python language host and the Kubernetes provider:
`python -m nodegate.localcluster.pulumi_tools` (`make pulumi-tools`).

No Pulumi release can be downloaded here (only module proxies answer), so each is compiled from
its Go module, like the control plane: cached outside the clone under a stamp of its own, built
into a staging directory renamed into place (a failed build leaves no stamp), a no-op when
cached, one shared Go build cache. What a test then needs is `ensure_pulumi_built()` and
`pulumi_environment()`: the engine, the host on PATH and the provider installed as a plugin in
a `PULUMI_HOME` under the cache, all offline.

Cold on 2 cores the engine takes 4 to 14 minutes and the provider 9 to 22 (over 4 GB of memory;
docs/controlplane.md has the figures): only the tests that run the real engine build them.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import stat
import subprocess
import time
from pathlib import Path

from nodegate.localcluster import gomodule, paths
from nodegate.localcluster.build import (
    _build_lock,
    _build_staged,
    _download,
    _ensure_cached,
    _go_build,
    _is_stamped,
    _module_dir,
    _plain_module,
    _print_flushed,
    _report,
    _write_gomod,
)
from nodegate.localcluster.gotool import Say, run_go
from nodegate.localcluster.versions import (
    PULUMI_KUBERNETES_MODULE,
    PULUMI_KUBERNETES_RELEASE,
    PULUMI_KUBERNETES_VERSION,
    PULUMI_PKG_MODULE,
    PULUMI_PYTHON_HOST_VERSION,
    PULUMI_SDK_MODULE,
    PULUMI_VERSION,
)

_SDK_VERSION_VAR = f"{PULUMI_SDK_MODULE}/go/common/version.Version"
_PROVIDER_COMMAND = "cmd/pulumi-resource-kubernetes"


@dataclasses.dataclass(frozen=True)
class PulumiTools:
    """The cached binaries a real `pulumi up` needs."""

    engine: Path
    """`pulumi` itself."""
    language_host_dir: Path
    """`pulumi-language-python` and `pulumi-language-python-exec`: goes on PATH, where the
    engine looks for language hosts."""
    kubernetes_provider: Path
    """`pulumi-resource-kubernetes`, installed into `PULUMI_HOME` by `install_kubernetes_plugin`."""


def ensure_pulumi_built(say: Say | None = None) -> PulumiTools:
    """The engine, the Python host and the Kubernetes provider, each built first if its cache
    is cold (the cheap host first, the provider, the longest, last)."""
    host = ensure_pulumi_python_host_built(say)
    engine = ensure_pulumi_engine_built(say)
    provider = ensure_pulumi_kubernetes_built(say)
    return PulumiTools(engine, host, provider)


def pulumi_is_built() -> bool:
    return engine_is_built() and python_host_is_built() and kubernetes_provider_is_built()


# --- the engine ---------------------------------------------------------------------------


def engine_stamp() -> dict[str, str]:
    return {"pulumi": PULUMI_VERSION, "package": f"{PULUMI_PKG_MODULE}/cmd/pulumi"}


def engine_is_built() -> bool:
    return _is_stamped(paths.pulumi_binary().parent, engine_stamp(), (paths.PULUMI,))


def ensure_pulumi_engine_built(say: Say | None = None) -> Path:
    """The cached `pulumi` binary, built first if the cache is cold (its own directory, stamp
    and lock, like helm's)."""
    return _ensure_cached(
        say,
        f"pulumi {PULUMI_VERSION}",
        engine_is_built,
        paths.pulumi_root(),
        _build_engine,
        paths.pulumi_binary(),
    )


def _build_engine(_: Path, say: Say) -> None:
    """`go build .../pkg/v3/cmd/pulumi` in a wrapper module requiring pkg/v3 and sdk/v3 at the
    same version, with pkg/v3's versioned replaces copied (its `sdk/v3 => ../sdk` is local, so
    sdk/v3 becomes a require), stamped with the version as Pulumi's own build does."""

    def fill(staging: Path) -> None:
        root = paths.pulumi_root()
        directory = _module_dir("pulumi", root)
        text, _ = _download(PULUMI_PKG_MODULE, PULUMI_VERSION, directory)
        upstream = gomodule.parse_upstream_gomod(text)
        wrapper = dataclasses.replace(
            gomodule.plain_wrapper(
                "pulumi", upstream.go_version, PULUMI_PKG_MODULE, PULUMI_VERSION
            ),
            requires={PULUMI_PKG_MODULE: PULUMI_VERSION, PULUMI_SDK_MODULE: PULUMI_VERSION},
            replace_lines=gomodule.versioned_replaces(text),
            godebug_lines=upstream.godebug_lines,
        )
        _write_gomod(directory, wrapper)
        _go_build(
            directory,
            [f"{PULUMI_PKG_MODULE}/cmd/pulumi"],
            output=str(staging / paths.PULUMI),
            ldflags=f"-s -w -X {_SDK_VERSION_VAR}={PULUMI_VERSION}",
            label="pulumi",
            say=say,
            root=root,
        )

    _build_staged(paths.pulumi_binary().parent, engine_stamp(), fill)


# --- the Python language host -------------------------------------------------------------


def python_host_stamp() -> dict[str, str]:
    return {
        "pulumi-language-python": PULUMI_PYTHON_HOST_VERSION,
        "package": f"{PULUMI_SDK_MODULE}/python/cmd/{paths.PULUMI_LANGUAGE_PYTHON}",
    }


def python_host_is_built() -> bool:
    return _is_stamped(
        paths.pulumi_language_python_dir(), python_host_stamp(), paths.PULUMI_LANGUAGE_PYTHON_FILES
    )


def ensure_pulumi_python_host_built(say: Say | None = None) -> Path:
    """The directory holding `pulumi-language-python` and its `-exec` script, built first if
    the cache is cold."""
    return _ensure_cached(
        say,
        f"pulumi-language-python {PULUMI_PYTHON_HOST_VERSION}",
        python_host_is_built,
        paths.pulumi_language_python_root(),
        _build_python_host,
        paths.pulumi_language_python_dir(),
    )


def _build_python_host(_: Path, say: Say) -> None:
    """The real host, from the package inside sdk/v3 (the newest sdk/v3 that holds it; see
    versions.py), and `pulumi-language-python-exec`, the script it runs programs with, copied
    from the same module's source (the PyPI wheel does not ship it)."""

    def fill(staging: Path) -> None:
        root = paths.pulumi_language_python_root()
        directory, source = _plain_module(
            "pulumi-language-python",
            PULUMI_SDK_MODULE,
            PULUMI_PYTHON_HOST_VERSION,
            root,
            keep_replaces=True,
        )
        _go_build(
            directory,
            [f"{PULUMI_SDK_MODULE}/python/cmd/{paths.PULUMI_LANGUAGE_PYTHON}"],
            output=str(staging / paths.PULUMI_LANGUAGE_PYTHON),
            ldflags=f"-s -w -X {_SDK_VERSION_VAR}={PULUMI_PYTHON_HOST_VERSION}",
            label="pulumi-language-python",
            say=say,
            root=root,
        )
        executor = staging / paths.PULUMI_LANGUAGE_PYTHON_EXEC
        shutil.copyfile(source / "python" / "cmd" / paths.PULUMI_LANGUAGE_PYTHON_EXEC, executor)
        executor.chmod(0o755)

    _build_staged(paths.pulumi_language_python_dir(), python_host_stamp(), fill)


# --- the Kubernetes provider --------------------------------------------------------------


def kubernetes_provider_stamp() -> dict[str, str]:
    return {
        "pulumi-kubernetes": PULUMI_KUBERNETES_RELEASE,
        "module": f"{PULUMI_KUBERNETES_MODULE}@{PULUMI_KUBERNETES_VERSION}",
    }


def kubernetes_provider_is_built() -> bool:
    return _is_stamped(
        paths.pulumi_kubernetes_binary().parent,
        kubernetes_provider_stamp(),
        (paths.PULUMI_RESOURCE_KUBERNETES,),
    )


def ensure_pulumi_kubernetes_built(say: Say | None = None) -> Path:
    """The cached `pulumi-resource-kubernetes` binary, built first if the cache is cold."""
    return _ensure_cached(
        say,
        f"pulumi-resource-kubernetes {PULUMI_KUBERNETES_RELEASE}",
        kubernetes_provider_is_built,
        paths.pulumi_kubernetes_root(),
        _build_kubernetes_provider,
        paths.pulumi_kubernetes_binary(),
    )


def _build_kubernetes_provider(_: Path, say: Say) -> None:
    """Built inside a writable copy of the provider's module, not a wrapper: its `main` embeds
    `schema-embed.json`, which `go run generate.go` writes from the zip's schema.json with the
    release stamped in. The copy's go.mod loses its `sdk/v4 => ../sdk` replace (the path exists
    only in the provider's repository), so sdk/v4 comes from the proxy at its required version."""

    def fill(staging: Path) -> None:
        root = paths.pulumi_kubernetes_root()
        scratch = _module_dir("download", root)
        text, source = _download(PULUMI_KUBERNETES_MODULE, PULUMI_KUBERNETES_VERSION, scratch)
        directory = root / "modules" / "provider"
        _writable_copy(source, directory)
        (directory / "go.mod").write_text(gomodule.drop_local_replaces(text), encoding="utf-8")
        say("  pulumi-kubernetes: generating the embedded schema (go run generate.go)")
        run_go(
            ["run", "-mod=mod", "generate.go"],
            cwd=directory / _PROVIDER_COMMAND,
            log_path=root / "logs" / "pulumi-kubernetes-generate.log",
            label="pulumi-kubernetes generate",
            say=say,
            env={"VERSION": PULUMI_KUBERNETES_RELEASE},
        )
        version = f"{PULUMI_KUBERNETES_MODULE}/pkg/version.Version={PULUMI_KUBERNETES_RELEASE}"
        _go_build(
            directory,
            [f"./{_PROVIDER_COMMAND}"],
            output=str(staging / paths.PULUMI_RESOURCE_KUBERNETES),
            ldflags=f"-s -w -X {version}",
            label="pulumi-kubernetes",
            say=say,
            root=root,
        )

    _build_staged(paths.pulumi_kubernetes_binary().parent, kubernetes_provider_stamp(), fill)


def _writable_copy(source: Path, target: Path) -> None:
    """A fresh copy of a module's source (the module cache is read-only) that generate.go and
    `-mod=mod` may write into."""
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target, copy_function=shutil.copyfile)
    for directory, _, files in os.walk(target):
        Path(directory).chmod(0o755)
        for name in files:
            file = Path(directory) / name
            file.chmod(file.stat().st_mode | stat.S_IWUSR)


# --- running them -------------------------------------------------------------------------


def pulumi_environment(
    tools: PulumiTools, home: Path | None = None, venv: Path | None = None
) -> dict[str, str]:
    """The environment the engine runs with: offline (no update check, no plugin downloads),
    `PULUMI_HOME` in the cache, the engine and the Python host first on PATH, and `venv` (the
    project's `.venv`, whose pulumi-kubernetes is pinned to the provider's release) activated:
    the host built here (v3.68.0) predates the engine's handing of Pulumi.yaml's
    `runtime.options` to hosts, so it finds the venv as a user's shell would. The backend
    (`pulumi login file://...`) and `PULUMI_CONFIG_PASSPHRASE` are the caller's."""
    env = dict(os.environ)
    first = [str(tools.engine.parent), str(tools.language_host_dir)]
    if venv is not None:
        env["VIRTUAL_ENV"] = str(venv)
        first.append(str(venv / "bin"))
    env.update(
        {
            "PULUMI_HOME": str(home or paths.pulumi_home()),
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PATH": os.pathsep.join([*first, env.get("PATH", "")]),
        }
    )
    return env


def kubernetes_plugin_dir(home: Path | None = None) -> Path:
    """Where `pulumi plugin install` puts the provider in `PULUMI_HOME`."""
    return (
        (home or paths.pulumi_home())
        / "plugins"
        / f"resource-kubernetes-v{PULUMI_KUBERNETES_RELEASE}"
    )


def install_kubernetes_plugin(tools: PulumiTools, home: Path | None = None) -> Path:
    """`pulumi plugin install resource kubernetes v<release> --file <binary>` into `PULUMI_HOME`
    unless it is there; under the engine's lock, since test workers may ask at once."""
    plugin = kubernetes_plugin_dir(home) / paths.PULUMI_RESOURCE_KUBERNETES
    if plugin.is_file():
        return plugin
    with _build_lock(paths.pulumi_root()):
        if not plugin.is_file():
            subprocess.run(
                [
                    str(tools.engine),
                    "plugin",
                    "install",
                    "resource",
                    "kubernetes",
                    f"v{PULUMI_KUBERNETES_RELEASE}",
                    "--file",
                    str(tools.kubernetes_provider),
                ],
                env=pulumi_environment(tools, home),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                check=True,
            )
    return plugin


def main(argv: list[str] | None = None) -> int:
    """CLI: build what is not cached (all three unless one is named) and print where."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--engine", action="store_true", help="only the engine (pulumi)")
    only.add_argument("--python-host", action="store_true", help="only pulumi-language-python")
    only.add_argument("--kubernetes", action="store_true", help="only pulumi-resource-kubernetes")
    args = parser.parse_args(argv)
    started = time.monotonic()

    def took() -> str:
        return f"{time.monotonic() - started:.2f}s"

    if args.engine:
        return _report(
            "pulumi", ensure_pulumi_engine_built, lambda path: f"pulumi ready at {path} ({took()})"
        )
    if args.python_host:
        return _report(
            "pulumi-language-python",
            ensure_pulumi_python_host_built,
            lambda path: f"pulumi-language-python ready in {path} ({took()})",
        )
    if args.kubernetes:
        return _report(
            "pulumi-resource-kubernetes",
            ensure_pulumi_kubernetes_built,
            lambda path: f"pulumi-resource-kubernetes ready at {path} ({took()})",
        )

    def all_tools() -> Path:
        return ensure_pulumi_built(_print_flushed).engine

    return _report(
        "pulumi tools",
        all_tools,
        lambda _: (
            f"pulumi {PULUMI_VERSION}, pulumi-language-python {PULUMI_PYTHON_HOST_VERSION} and "
            f"pulumi-resource-kubernetes {PULUMI_KUBERNETES_RELEASE} ready ({took()})"
        ),
    )


if __name__ == "__main__":
    raise SystemExit(main())
