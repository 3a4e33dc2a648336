"""The runtime closure the image must hold exactly: requirements followed, extras only on demand."""

from __future__ import annotations

from nodegate.image.contents import Distribution, runtime_closure, versions


def dist(*requires: str) -> Distribution:
    return {"version": "1.0", "requires": list(requires)}


LISTING = {
    "nodegate": dist("kubernetes>=30", "Typer>=0.12", 'pulumi>=3; extra == "infra"'),
    "kubernetes": dist("urllib3[socks]>=1.24", 'google-auth; extra == "adal"'),
    "typer": dist("click"),
    "urllib3": dist('PySocks>=1.5; extra == "socks"', 'brotli; extra == "brotli"'),
    "click": dist('colorama; platform_system == "Windows"'),
    "pysocks": dist(),
    "pulumi": dist(),
    "google-auth": dist(),
}


def test_the_closure_follows_requirements_and_asked_for_extras_only() -> None:
    assert runtime_closure("nodegate", LISTING) == {
        "nodegate",
        "kubernetes",
        "typer",
        "click",
        "urllib3",
        "pysocks",
    }


def test_a_project_extra_is_not_part_of_the_runtime() -> None:
    assert "pulumi" not in runtime_closure("nodegate", LISTING)


def test_versions_by_name() -> None:
    assert versions({"a": dist(), "b": {"version": "2", "requires": []}}) == {"a": "1.0", "b": "2"}


def test_an_extra_the_image_installs_is_followed() -> None:
    listing = {
        **LISTING,
        "nodegate": dist("kubernetes>=30", 'oci>=2; extra == "oci"'),
        "oci": dist(),
    }
    assert "oci" in runtime_closure("nodegate", listing, ("oci",))
    assert "oci" not in runtime_closure("nodegate", listing)
