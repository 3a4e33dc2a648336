"""Engine command lines: runc, bounded ulimits, offline builds fed from a wheelhouse."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodegate.image import engine
from nodegate.image.engine import (
    DOCKER,
    PODMAN,
    build_argv,
    detect_engine,
    ensure_commands,
    import_argv,
    ulimit_flags,
)
from nodegate.image.errors import ImageError

LIMITS = {"nofile": 20000, "nproc": 96365}


def _build(**overrides: object) -> list[str]:
    args: dict[str, object] = {
        "context": Path("/repo"),
        "dockerfile": Path("/repo/Dockerfile"),
        "tag": "nodegate:0.1.0",
        "iidfile": Path("/repo/build/image/iid"),
        "labels": {},
        "hard_limits": LIMITS,
    }
    args.update(overrides)
    which = args.pop("engine", PODMAN)
    return build_argv(which, **args)  # type: ignore[arg-type]


def test_ulimits_are_explicit_and_never_above_the_hosts_hard_limit() -> None:
    assert ulimit_flags({"nofile": 1024, "nproc": -1}) == [
        "--ulimit=nofile=1024:1024",
        "--ulimit=nproc=4096:4096",
    ]


def test_podman_builds_with_runc_and_never_pulls() -> None:
    argv = _build()
    assert argv[:2] == ["podman", "build"]
    assert "--pull=never" in argv
    assert argv[argv.index("--runtime") + 1] == "runc"
    assert argv[-1] == "/repo"
    assert "--network=none" not in argv


def test_a_wheelhouse_build_is_offline_with_pip_home_mounted_read_only_as_root_home() -> None:
    argv = _build(pip_home=Path("/repo/build/image/pip-home"))
    assert "--network=none" in argv
    assert argv[argv.index("--volume") + 1] == "/repo/build/image/pip-home:/root:ro"


def test_docker_cannot_take_a_wheelhouse_mount() -> None:
    with pytest.raises(ImageError, match="only be mounted into a podman build"):
        _build(engine=DOCKER, pip_home=Path("/x"))


def test_docker_build_has_no_podman_only_flags() -> None:
    argv = _build(engine=DOCKER, no_cache=True)
    assert argv[:2] == ["docker", "build"]
    assert "--runtime" not in argv
    assert "--no-cache" in argv


def test_a_release_build_sets_every_time_in_the_image_to_the_commits() -> None:
    # `make release`: the image's creation and file times, and pip's bytecode (checked by hash
    # when SOURCE_DATE_EPOCH is set), are the same in two builds of one commit.
    argv = _build(epoch=1_796_590_000)
    assert argv[argv.index("--timestamp") + 1] == "1796590000"
    assert argv[argv.index("--build-arg") + 1] == "SOURCE_DATE_EPOCH=1796590000"
    assert "--timestamp" not in _build()


def test_docker_cannot_build_reproducibly_here() -> None:
    with pytest.raises(ImageError, match="needs podman"):
        _build(engine=DOCKER, epoch=0)


def test_import_applies_config_changes_before_the_tarball() -> None:
    argv = import_argv(
        PODMAN, Path("/t/rootfs.tar"), "docker.io/library/python:3.11-slim", ["ENV A=b"]
    )
    assert argv == [
        "podman",
        "import",
        "--change",
        "ENV A=b",
        "/t/rootfs.tar",
        "docker.io/library/python:3.11-slim",
    ]


MISSING = {"nodegate-no-such-command": "nodegate-no-such-package"}


def test_a_missing_command_names_the_package_to_install_when_installing_is_off() -> None:
    with pytest.raises(ImageError, match=r"needs nodegate-no-such-package: run `apt-get install"):
        ensure_commands(MISSING, install=False, say=print, purpose="podman")


def test_a_missing_command_is_not_installed_by_a_non_root_user(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    with pytest.raises(ImageError, match=r"only be installed here as root .*`sudo apt-get install"):
        ensure_commands(MISSING, install=True, say=print, purpose="podman")


def test_docker_is_used_when_its_daemon_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "docker_answers", lambda: True)
    assert detect_engine(install=False, say=print) == DOCKER
