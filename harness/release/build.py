"""`make release`: dist/ with the wheel, the sdist, the chart and SHA256SUMS, all of one version.

The version is pyproject.toml's `version`, and only there: the wheel and sdist carry it as
their metadata, so `nodegate --version` and `nodegate version` print it and the manifests and
the chart deploy `<repository>:<it>`; the chart carries it as `appVersion` (its own `version`
is the chart's, and names the chart's file); `make image` tags the image with it. This builds
the artifacts and refuses a release whose artifacts disagree on it.

A release is of one commit (HEAD unless `--ref`), exported with `git archive`: what the working
tree holds beside it is left out. The sdist and the wheel are built as PyPA's frontend builds
them (`python -m build`: the sdist, then the wheel from the unpacked sdist), with the build
backend at the versions constraints.txt pins and SOURCE_DATE_EPOCH at the commit's time, then
checked by `twine check --strict`; the committed chart is packaged by `helm package`. File times
inside the sdist and the chart are set to the commit's, so two releases of one commit are the
same bytes. `--image` adds the reconciler image as an OCI archive (`make image` on the exported
tree, then the engine's `save --format oci-archive`)."""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from nodegate.release.constraints import CONSTRAINTS_FILE
from nodegate.release.helm import helm_for_packaging

DIST = "dist"
CHART_DIR = Path("charts") / "nodegate"
SUMS_FILE = "SHA256SUMS"


class ReleaseError(Exception):
    """A release that cannot be made as asked: the message says why."""


@dataclass(frozen=True)
class Artifact:
    path: Path
    size_bytes: int
    sha256: str


def project_version(repo: Path) -> str:
    """The one version: pyproject.toml's [project] version."""
    pyproject = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))
    return str(pyproject["project"]["version"])


def expected_names(version: str) -> dict[str, str]:
    """The file the sdist and the wheel must have."""
    return {"sdist": f"nodegate-{version}.tar.gz", "wheel": f"nodegate-{version}-py3-none-any.whl"}


def chart_name(chart_version: str) -> str:
    """The chart's file, by the chart's own version (what `helm push` and `helm install
    --version` know it by; its appVersion is the package's)."""
    return f"nodegate-chart-{chart_version}.tgz"


def commit_time(repo: Path, commit: str) -> str:
    """The commit's time (seconds since the epoch), for SOURCE_DATE_EPOCH."""
    done = subprocess.run(
        ["git", "-C", str(repo), "show", "-s", "--format=%ct", commit],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def build_env(constraints: Path, epoch: str) -> dict[str, str]:
    """The environment of the Python build: the backend at the pinned versions, file times in
    the archives at `epoch` (SOURCE_DATE_EPOCH, reproducible-builds.org)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_CONSTRAINT")}
    env["PIP_CONSTRAINT"] = str(constraints)
    env["SOURCE_DATE_EPOCH"] = epoch
    return env


def build_python(
    repo: Path, out: Path, *, epoch: str, python: str = sys.executable
) -> tuple[Path, Path]:
    """The sdist and the wheel built from it, from the tree `repo` into `out`: (sdist, wheel)."""
    out.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [python, "-m", "build", "--outdir", str(out), str(repo)],
        capture_output=True,
        text=True,
        env=build_env(repo / CONSTRAINTS_FILE, epoch),
        check=False,
    )
    if done.returncode != 0:
        raise ReleaseError(f"python -m build failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    version = project_version(repo)
    names = expected_names(version)
    sdist, wheel = out / names["sdist"], out / names["wheel"]
    missing = [p.name for p in (sdist, wheel) if not p.is_file()]
    if missing:
        built = sorted(p.name for p in out.iterdir())
        raise ReleaseError(f"expected {missing} for version {version}; built {built}")
    return sdist, wheel


def twine_check(files: Sequence[Path], bin_dir: Path) -> None:
    """`twine check --strict`: the metadata and README render as PyPI would show them."""
    done = subprocess.run(
        [str(bin_dir / "twine"), "check", "--strict", *map(str, files)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise ReleaseError(f"twine check failed:\n{done.stdout}{done.stderr}")


def chart_versions(chart_yaml: str) -> tuple[str, str]:
    """(version, appVersion) of a Chart.yaml."""
    chart = yaml.safe_load(chart_yaml)
    return str(chart["version"]), str(chart["appVersion"])


def package_chart(repo: Path, out: Path, version: str) -> Path:
    """`helm package` of charts/nodegate, after checking it deploys the project's version (its
    appVersion, the image tag it defaults to)."""
    chart_dir = repo / CHART_DIR
    chart_version, app_version = chart_versions(
        (chart_dir / "Chart.yaml").read_text(encoding="utf-8")
    )
    if app_version != version:
        raise ReleaseError(
            f"{chart_dir}/Chart.yaml has appVersion {app_version}, not {version}: set it to "
            "pyproject.toml's version (and raise the chart's version)"
        )
    helm = helm_for_packaging()
    with _scratch(out, ".chart") as scratch:
        done = subprocess.run(
            [str(helm), "package", str(chart_dir), "--destination", str(scratch)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise ReleaseError(f"helm package failed:\n{done.stdout}{done.stderr}")
        [packaged] = scratch.glob("*.tgz")
        # helm names it nodegate-<version>.tgz, as the sdist is named: renamed so the two
        # cannot be mistaken for each other in one folder.
        target = out / chart_name(chart_version)
        packaged.replace(target)
    return target


@contextlib.contextmanager
def _scratch(out: Path, name: str = ".scratch") -> Iterator[Path]:
    """A scratch folder inside `out`, removed afterwards."""
    path = out / name
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def sdist_version(sdist: Path) -> str:
    """The version in the sdist's PKG-INFO."""
    with tarfile.open(sdist) as archive:
        [member] = [m for m in archive.getmembers() if m.name.count("/") == 1 and
                    m.name.endswith("/PKG-INFO")]  # fmt: skip
        handle = archive.extractfile(member)
        assert handle is not None
        for line in handle.read().decode().splitlines():
            if line.startswith("Version: "):
                return line.removeprefix("Version: ")
    raise ReleaseError(f"{sdist.name}: no Version in PKG-INFO")


def _retimed(member: tarfile.TarInfo, epoch: int) -> tarfile.TarInfo:
    member.mtime = epoch
    member.pax_headers = {
        key: value
        for key, value in member.pax_headers.items()
        if key not in ("mtime", "atime", "ctime")
    }
    return member


def normalize_tar_gz(path: Path, epoch: int) -> None:
    """Rewrite a .tar.gz with every file time at `epoch` and none in the gzip header.

    The sdist's generated files (PKG-INFO, the egg-info) and every file of `helm package` carry
    the time they were written, and gzip stamps its header with it, so two builds of one commit
    differed in those bytes alone; the contents and their order are kept as they are.
    """
    with tarfile.open(path) as source:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as target:
            for member in source:
                handle = source.extractfile(member) if member.isfile() else None
                target.addfile(_retimed(member, epoch), handle)
    with (
        path.open("wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=epoch) as packed,
    ):
        packed.write(buffer.getvalue())


def normalize_tar(path: Path, epoch: int) -> None:
    """Rewrite an uncompressed tar (the image's OCI archive) with its entries in name order and
    every file time at `epoch`: two saves of one image differed in the save's file times alone
    (the manifest and every blob the same)."""
    rewritten = path.with_name(path.name + ".part")
    with (
        tarfile.open(path) as source,
        tarfile.open(rewritten, mode="w", format=tarfile.PAX_FORMAT) as target,
    ):
        for member in sorted(source.getmembers(), key=lambda m: m.name):
            handle = source.extractfile(member) if member.isfile() else None
            target.addfile(_retimed(member, epoch), handle)
    rewritten.replace(path)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_sums(out: Path, files: Sequence[Path]) -> list[Artifact]:
    """SHA256SUMS in `sha256sum -c`'s format, and what it lists."""
    artifacts = [Artifact(p, p.stat().st_size, sha256(p)) for p in sorted(files)]
    (out / SUMS_FILE).write_text("".join(f"{a.sha256}  {a.path.name}\n" for a in artifacts))
    return artifacts


def save_image(repo: Path, out: Path, version: str, *, epoch: int, fresh: bool) -> Path:
    """`make image` of the tree `repo`, reproducibly (every time in it at `epoch`), then the
    image as an OCI archive, nodegate-image-<version>.oci.tar, named `nodegate:<version>`."""
    from nodegate.image import build as image_build  # noqa: PLC0415  (only with --image)
    from nodegate.image.errors import ImageError  # noqa: PLC0415

    def say(line: str) -> None:
        print(f"image: {line}", flush=True)

    try:
        built = image_build.build(repo, install=False, say=say, epoch=epoch, fresh=fresh)
    except ImageError as err:
        raise ReleaseError(f"the image: {err}") from err
    if built.tag != f"{image_build.IMAGE_NAME}:{version}":
        raise ReleaseError(f"the image is tagged {built.tag}, not of version {version}")
    target = out / f"nodegate-image-{version}.oci.tar"
    # Saved by its tag, so the archive names it; the tag is checked to be this build's id.
    ref = f"localhost/{built.tag}"
    tagged = subprocess.run(
        [built.engine, "image", "inspect", "--format", "{{.Id}}", ref],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if tagged.removeprefix("sha256:") != built.id.removeprefix("sha256:"):
        raise ReleaseError(f"{ref} is {tagged or 'absent'} now, not the image built ({built.id})")
    done = subprocess.run(
        [built.engine, "save", "--format", "oci-archive", "--output", str(target), ref],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise ReleaseError(f"{built.engine} save failed:\n{done.stdout}{done.stderr}")
    normalize_tar(target, epoch)
    print(f"image: {ref} is {built.id} (base {built.base}: {built.base_how})", flush=True)
    return target


def export(repo: Path, ref: str, into: Path) -> str:
    """The tree of commit `ref` (tracked files only, as committed) into `into`; its full id."""
    done = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", f"{ref}^{{commit}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise ReleaseError(f"{ref}: not a commit of {repo}: {done.stderr.strip()}")
    commit = done.stdout.strip()
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar", commit],
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return commit


def artifacts_of(source: Path, out: Path, *, epoch: str, bin_dir: Path) -> list[Path]:
    """The sdist, the wheel and the chart of the tree `source`, into `out`, each checked to
    carry its version: what `make release` ships but the image."""
    version = project_version(source)
    sdist, wheel = build_python(source, out, epoch=epoch, python=str(bin_dir / "python"))
    if (found := sdist_version(sdist)) != version:
        raise ReleaseError(f"{sdist.name}: PKG-INFO says {found}, not {version}")
    chart = package_chart(source, out, version)
    for archive in (sdist, chart):
        normalize_tar_gz(archive, int(epoch))
    twine_check([sdist, wheel], bin_dir)
    return [sdist, wheel, chart]


def release(
    repo: Path, *, ref: str, image: bool, bin_dir: Path, fresh: bool = False
) -> tuple[str, list[Artifact]]:
    """Everything into dist/ (emptied first), built from commit `ref` alone (what the working
    tree holds beside it is left out): the commit, and the artifacts with their checksums."""
    out = repo / DIST
    shutil.rmtree(out, ignore_errors=True)
    with _scratch(out) as scratch:
        source = scratch / "source"
        commit = export(repo, ref, source)
        epoch = commit_time(repo, commit)
        files = artifacts_of(source, out, epoch=epoch, bin_dir=bin_dir)
        if image:
            version = project_version(source)
            files.append(save_image(source, out, version, epoch=int(epoch), fresh=fresh))
    return commit, write_sums(out, files)


def table(artifacts: Sequence[Artifact], seconds: float, notes: Mapping[str, str]) -> str:
    lines = [f"dist/ in {seconds:.1f} s:"]
    for artifact in artifacts:
        size = artifact.size_bytes
        shown = f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size / 1e3:.1f} kB"
        lines.append(f"  {artifact.path.name:<40} {shown:>9}  sha256 {artifact.sha256[:16]}")
    lines.append(f"  {SUMS_FILE}")
    lines += [f"  ({key}: {value})" for key, value in notes.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="repository root")
    parser.add_argument("--ref", default="HEAD", help="the commit to release (default HEAD)")
    parser.add_argument(
        "--image", action="store_true", help="also the image, as an OCI archive (make image)"
    )
    parser.add_argument(
        "--fresh", action="store_true", help="with --image: no layer from the engine's cache"
    )
    args = parser.parse_args(argv)
    started = time.monotonic()
    repo = args.repo.resolve()
    try:
        commit, artifacts = release(
            repo,
            ref=args.ref,
            image=args.image,
            bin_dir=Path(sys.executable).parent,
            fresh=args.fresh,
        )
    except ReleaseError as err:
        print(f"make release: {err}", file=sys.stderr)
        return 1
    notes = {} if args.image else {"image": "not built; make release-image adds it"}
    notes["from"] = f"commit {commit[:12]}; the working tree's changes are not in it"
    print(table(artifacts, time.monotonic() - started, notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
