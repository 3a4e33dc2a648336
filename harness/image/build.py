"""`make image`: build the reconciler image from the repository's Dockerfile.

`python -m nodegate.image.build [--repo DIR]` picks the engine, makes sure the Dockerfile's base
images are local (present, pulled, or made from Debian packages), builds, checks that the image
holds the dependency versions it was fed, and records what it built in build/image/image.json
(the e2e test runs that image by id, not whatever carries the tag on a machine shared by
several clones). The engine caches the base and the layers, so a second run is quick.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name, parse_wheel_filename

from nodegate.image import base as debian
from nodegate.image import contents
from nodegate.image import engine as eng
from nodegate.image.dockerfile import external_bases, qualified
from nodegate.image.errors import ImageError
from nodegate.image.wheelhouse import WHEELHOUSE_DIR, prepare_pip_home
from nodegate.localcluster.paths import cache_root

IMAGE_NAME = "nodegate"
STATE_DIR = Path("build") / "image"
RECORD_FILE = "image.json"


@dataclass(frozen=True)
class BuiltImage:
    """What `make image` built; read back by the container e2e test."""

    engine: eng.EngineName
    tag: str
    id: str
    size_bytes: int
    version: str
    build_seconds: float
    base: str
    base_how: str
    """present | pulled | made from Debian packages in N s"""


def image_tag(pyproject: Mapping[str, Any]) -> str:
    """`nodegate:<package version>`: the tag follows the version in pyproject.toml."""
    return f"{IMAGE_NAME}:{pyproject['project']['version']}"


def wheel_versions(wheel_names: list[str]) -> dict[str, str]:
    """Canonical distribution name -> version, from wheel file names."""
    versions: dict[str, str] = {}
    for name in wheel_names:
        dist, version, _, _ = parse_wheel_filename(name)
        versions[canonicalize_name(dist)] = str(version)
    return versions


def stale_distributions(
    installed: Mapping[str, str], fed: Mapping[str, str], project: str
) -> list[str]:
    """Installed distributions whose version is not the one fed in (a layer cache built from
    other wheels, e.g. by another clone sharing the engine's storage)."""
    stale = []
    for name, version in sorted(installed.items()):
        key = canonicalize_name(name)
        if key != canonicalize_name(project) and fed.get(key) != version:
            stale.append(f"{name} {version} (fed {fed.get(key, 'nothing')})")
    return stale


def read_record(repo: Path) -> BuiltImage:
    """The image the last `make image` in `repo` built."""
    path = repo / STATE_DIR / RECORD_FILE
    if not path.is_file():
        raise ImageError(f"{path}: no image built yet: run `make image`")
    return BuiltImage(**json.loads(path.read_text()))


LOCK_FILE = "constraints.txt"
"""The committed runtime lock the wheelhouse is built to (and the Dockerfile installs with)."""


def build(
    repo: Path, *, install: bool, say: eng.Say, epoch: int | None = None, fresh: bool = False
) -> BuiltImage:
    """Build the image from `repo`/Dockerfile with the engine at hand.

    `epoch`: a reproducible build, every time in the image at that second (podman; `make
    release`); `fresh`: no layer from the cache, so a second build proves it."""
    pyproject = tomllib.loads((repo / "pyproject.toml").read_text())
    dockerfile = repo / "Dockerfile"
    bases = external_bases(dockerfile.read_text(), source=str(dockerfile))
    state = repo / STATE_DIR
    state.mkdir(parents=True, exist_ok=True)
    engine = eng.detect_engine(install=install, say=say)
    limits = eng.host_hard_limits()
    tag = image_tag(pyproject)
    with _engine_lock():
        base_how = {
            image: _ensure_base(engine, image, state, install=install, say=say) for image in bases
        }
        pip_home: Path | None = None
        if engine.name == "podman":
            python = _image_python(bases)
            pip_home = state / "pip-home"
            lock = (repo / LOCK_FILE).read_text(encoding="utf-8")
            prepare_pip_home(pip_home, pyproject, lock, python, say)
        started = time.monotonic()
        image_id = _build(
            engine, repo, state, tag, limits, pip_home, no_cache=fresh, epoch=epoch, say=say
        )
        if pip_home is not None:
            stale = _stale(engine, image_id, limits, pip_home, pyproject["project"]["name"])
            if stale:
                say(f"cached layers hold other versions ({', '.join(stale[:3])}): rebuilding")
                image_id = _build(
                    engine, repo, state, tag, limits, pip_home, no_cache=True, epoch=epoch, say=say
                )
                stale = _stale(engine, image_id, limits, pip_home, pyproject["project"]["name"])
                if stale:
                    raise ImageError(f"the image does not hold the wheels fed to it: {stale}")
        seconds = time.monotonic() - started
    record = eng.inspect_image(engine, image_id)
    if record is None:
        raise ImageError(f"{engine.name} built {image_id} but cannot inspect it")
    built = BuiltImage(
        engine=engine.name,
        tag=tag,
        id=image_id,
        size_bytes=int(record["Size"]),
        version=str(pyproject["project"]["version"]),
        build_seconds=round(seconds, 1),
        base=", ".join(bases),
        base_how="; ".join(f"{b}: {how}" for b, how in base_how.items()),
    )
    # Replaced images are not removed: a clone sharing the engine may have built the same id
    # from the layer cache and be about to test it (`podman image prune` reclaims the space).
    (state / RECORD_FILE).write_text(json.dumps(asdict(built), indent=2) + "\n")
    return built


@contextlib.contextmanager
def _engine_lock() -> Iterator[None]:
    """Clones on one machine share the engine's images: one base import and build at a time."""
    lock = cache_root() / "image.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _image_python(bases: list[str]) -> str:
    """The Python minor version of the image, from its python:X.Y-* base."""
    for image in bases:
        name = qualified(image)
        if name.startswith("docker.io/library/python:"):
            return name.rsplit(":", 1)[1].split("-", 1)[0]
    raise ImageError(f"Dockerfile: no python:X.Y base among {bases}; wheels need its version")


def _ensure_base(
    engine: eng.Engine, image: str, state: Path, *, install: bool, say: eng.Say
) -> str:
    name = qualified(image)
    if eng.inspect_image(engine, name) is not None:
        return "present"
    pull_error = eng.try_pull(engine, name)
    if pull_error is None:
        return "pulled"
    try:
        stand_in = debian.debian_base_for(image)
    except ImageError as err:
        raise ImageError(f"cannot pull {image} ({pull_error}), and {err}") from err
    say(f"cannot pull {image} ({pull_error}); making it from Debian {stand_in.release} packages")
    eng.ensure_commands(eng.BASE_PACKAGES, install=install, say=say, purpose="an offline base")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=state) as scratch:
        tarball = Path(scratch) / "rootfs.tar"
        eng.run_checked(
            debian.mmdebstrap_argv(stand_in, tarball), what="mmdebstrap", log=state / "base.log"
        )
        eng.run_checked(
            eng.import_argv(engine, tarball, name, debian.IMAGE_CONFIG),
            what=f"{engine.name} import",
            log=state / "base-import.log",
        )
    return f"made from Debian packages in {time.monotonic() - started:.1f} s"


def _build(
    engine: eng.Engine,
    repo: Path,
    state: Path,
    tag: str,
    limits: Mapping[str, int],
    pip_home: Path | None,
    *,
    no_cache: bool,
    epoch: int | None,
    say: eng.Say,
) -> str:
    iidfile = state / "iid"
    iidfile.unlink(missing_ok=True)
    argv = eng.build_argv(
        engine,
        context=repo,
        dockerfile=repo / "Dockerfile",
        tag=tag,
        iidfile=iidfile,
        labels={},
        hard_limits=limits,
        pip_home=pip_home,
        no_cache=no_cache,
        epoch=epoch,
    )
    say(f"building {tag} with {engine.name} (log {state / 'build.log'})")
    eng.run_checked(argv, what=f"{engine.name} build", log=state / "build.log")
    return iidfile.read_text().strip()


def list_distributions(
    engine: eng.Engine, image_id: str, limits: Mapping[str, int]
) -> contents.Listing:
    """Every distribution the image's `python` sees, listed by that interpreter."""
    argv = [
        engine.name,
        "run",
        "--rm",
        "--network=none",
        *eng.run_isolation_flags(engine, limits),
        "--entrypoint",
        "python",
        image_id,
        "-c",
        contents.LIST_DISTRIBUTIONS,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ImageError(f"cannot list the image's Python distributions:\n{done.stderr}")
    listing: contents.Listing = json.loads(done.stdout)
    return listing


def _stale(
    engine: eng.Engine, image_id: str, limits: Mapping[str, int], pip_home: Path, project: str
) -> list[str]:
    installed = contents.versions(list_distributions(engine, image_id, limits))
    fed = wheel_versions([p.name for p in (pip_home / WHEELHOUSE_DIR).glob("*.whl")])
    return stale_distributions(installed, fed, project)


def _say(line: str) -> None:
    print(f"make image: {line}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="repository root")
    parser.add_argument(
        "--no-install", action="store_true", help="never install podman/mmdebstrap with apt-get"
    )
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        built = build(args.repo.resolve(), install=not args.no_install, say=_say)
    except ImageError as err:
        print(f"make image: {err}", file=sys.stderr)
        return 1
    short_id = built.id.removeprefix("sha256:")[:12]
    _say(
        f"{built.tag} ({short_id}): {built.size_bytes / 1e6:.1f} MB, built by {built.engine}"
        f" in {built.build_seconds:.1f} s ({time.monotonic() - started:.1f} s in all);"
        f" base {built.base_how}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
