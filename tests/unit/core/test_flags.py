"""Flags derived from a settings model: names, defaults and help from the fields, once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, create_model

from nodegate.core.text.flags import (
    Flag,
    FlagDeclarationError,
    FlagGroup,
    flag_argv,
    flags,
    values_from_flags,
)

DOCSTRINGS = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class Server(BaseModel):
    model_config = DOCSTRINGS

    port: int = 9443
    """Port to serve on."""
    hosts: Annotated[tuple[str, ...], Flag("host")] = ()
    """Extra names."""


class Lease(BaseModel):
    model_config = DOCSTRINGS

    enabled: Annotated[bool, Flag("elect")] = True
    """Elect a leader."""
    lease_name: str = "lease"
    """Name of the
    Lease."""


class Settings(BaseModel):
    model_config = DOCSTRINGS

    config_file: Path | None = None
    """Where the config is."""
    workers: int = Field(default=4, ge=1)
    """Workers."""
    lease: Annotated[Lease, FlagGroup()] = Field(default_factory=Lease)
    """Leader election."""
    server: Annotated[Server | None, FlagGroup("server-", enabled_by="port")] = None
    """Serve (the --server-* flags)."""


def test_a_flag_is_named_after_its_field_under_its_groups_prefix() -> None:
    assert [spec.name for spec in flags(Settings)] == [
        "config-file",
        "workers",
        "elect",
        "lease-name",
        "server-port",
        "server-host",
    ]


def test_a_flag_takes_its_fields_default_and_docstring_on_one_line() -> None:
    by_name = {spec.name: spec for spec in flags(Settings)}

    assert (by_name["workers"].default, by_name["workers"].help) == (4, "Workers.")
    assert by_name["lease-name"].help == "Name of the Lease."
    assert by_name["elect"].switch and by_name["server-host"].repeatable


def test_the_flag_that_enables_a_group_has_no_default_of_its_own() -> None:
    port = next(spec for spec in flags(Settings) if spec.name == "server-port")

    assert (port.default, port.enables_group) == (None, True)


def test_values_round_trip_through_argv() -> None:
    values = {
        "config_file": Path("/etc/x.yaml"),
        "lease": {"enabled": False},
        "server": {"hosts": ("a", "b")},
    }

    argv = flag_argv(Settings, values)
    parsed = dict(arg.removeprefix("--").partition("=")[::2] for arg in argv)

    assert argv == [
        "--config-file=/etc/x.yaml",
        "--no-elect",
        "--server-port=9443",
        "--server-host=a",
        "--server-host=b",
    ]
    given = {
        "config-file": Path(parsed["config-file"]),
        "elect": False,
        "server-port": int(parsed["server-port"]),
        "server-host": ["a", "b"],
    }
    assert Settings.model_validate(values_from_flags(Settings, given)) == Settings.model_validate(
        values
    )


def test_a_group_without_its_enabling_flag_is_off() -> None:
    values = values_from_flags(Settings, {"server-host": ["a"], "workers": 2})

    assert values == {"workers": 2}


def test_a_field_without_a_docstring_cannot_be_a_flag() -> None:
    class Undocumented(BaseModel):
        model_config = DOCSTRINGS

        workers: int = 1

    with pytest.raises(FlagDeclarationError, match="no docstring"):
        flags(Undocumented)


@pytest.mark.parametrize(
    "annotation",
    [tuple[Server, ...], list[Server], dict[str, Server], Server | Lease, int],
    ids=["tuple", "list", "dict", "two-models", "no-model"],
)
def test_a_flag_group_on_anything_but_one_model_is_refused(annotation: object) -> None:
    field: Any = (Annotated[annotation, FlagGroup()], None)
    grouped = create_model("Grouped", group=field)

    with pytest.raises(FlagDeclarationError, match="FlagGroup on a non-model"):
        flags(grouped)


class Logging(BaseModel):
    model_config = DOCSTRINGS

    log_format: Literal["json", "text"] = "json"
    """How each line is written."""
    log_level: Literal["info", "debug"] | None = None
    """How much is written."""


def test_a_literal_field_is_a_flag_offering_its_values_in_their_order() -> None:
    log_format, log_level = flags(Logging)

    assert (log_format.kind, log_format.choices, log_format.default) == (
        str,
        ("json", "text"),
        "json",
    )
    assert (log_level.kind, log_level.choices, log_level.default) == (str, ("info", "debug"), None)


def test_a_literal_flag_round_trips_through_argv() -> None:
    argv = flag_argv(Logging, {"log_format": "text", "log_level": "debug"})

    assert argv == ["--log-format=text", "--log-level=debug"]
    parsed = values_from_flags(Logging, {"log-format": "text", "log-level": "debug"})
    assert Logging.model_validate(parsed) == Logging(log_format="text", log_level="debug")


def test_a_flag_of_any_other_kind_offers_no_choices() -> None:
    assert {spec.choices for spec in flags(Settings)} == {()}
