"""OKE user_data: golden renderings, the MIME merge with a user's cloud-init, size and order."""

from __future__ import annotations

import base64
import email
import email.message
import random
from email.message import Message
from importlib.resources import files

import pytest
import yaml

from nodegate.bootstrap.errors import BootstrapError, UserDataTooLargeError
from nodegate.bootstrap.oke import (
    kubelet_extra_args,
    oke_node_metadata,
    render_oke_bootstrap_script,
    render_oke_cloud_init,
    user_data_budget,
)
from nodegate.bootstrap.user_data import (
    NODEGATE_SCRIPT_FILENAME,
    OCI_METADATA_LIMIT,
    OKE_USER_DATA_BUDGET,
    USER_CLOUD_CONFIG_FILENAME,
    USER_SCRIPT_FILENAME,
    metadata_payload,
)
from nodegate.core.rules.loader import parse_rules
from tests.unit.bootstrap.support import (
    GOLDEN,
    check_golden,
    decode_payload,
    example_rules,
    pool_params,
    rules_and_pool,
)

OKE_POOLS = pool_params("oke")


def _parts(user_data: str) -> list[Message]:
    message = email.message_from_string(user_data)
    assert message.get_content_type() == "multipart/mixed"
    payload = message.get_payload()
    assert isinstance(payload, list)
    return [part for part in payload if isinstance(part, email.message.Message)]


def _text(part: Message) -> str:
    raw = part.get_payload(decode=True)
    assert isinstance(raw, bytes)
    return raw.decode("utf-8")


# Golden files -------------------------------------------------------------------------------


@pytest.mark.parametrize(("rule_set", "pool"), OKE_POOLS)
def test_cloud_init_matches_golden(rule_set: str, pool: str) -> None:
    rules, node_pool = rules_and_pool(rule_set, pool)
    check_golden(f"{rule_set}/{pool}.cloud-init.sh", render_oke_cloud_init(rules, node_pool))


@pytest.mark.parametrize(("rule_set", "pool"), OKE_POOLS)
def test_kubelet_args_match_golden(rule_set: str, pool: str) -> None:
    rules, node_pool = rules_and_pool(rule_set, pool)
    check_golden(f"{rule_set}/{pool}.kubelet-args.txt", kubelet_extra_args(rules, node_pool) + "\n")


@pytest.mark.parametrize(
    ("rule_set", "pool"),
    [
        pytest.param("example", "gpu", id="example-gpu"),
        pytest.param("awkward", "data-1", id="awkward-data-1"),
    ],
)
@pytest.mark.parametrize("user_kind", ["cloud-config", "script"])
def test_cloud_init_with_a_user_part_matches_golden(
    rule_set: str, pool: str, user_kind: str, user_cloud_config: str, user_script: str
) -> None:
    rules, node_pool = rules_and_pool(rule_set, pool)
    user = user_cloud_config if user_kind == "cloud-config" else user_script
    check_golden(
        f"{rule_set}/{pool}.cloud-init+user-{user_kind}.mime",
        render_oke_cloud_init(rules, node_pool, user),
    )


# Shape of the user_data ---------------------------------------------------------------------


def test_without_a_user_part_user_data_is_the_plain_boot_script() -> None:
    rules, pool = rules_and_pool("example", "ci")
    user_data = render_oke_cloud_init(rules, pool)
    assert user_data.startswith("#!/bin/bash\n")
    assert user_data == render_oke_bootstrap_script(rules, pool)


def test_a_blank_user_part_is_the_same_as_none() -> None:
    rules, pool = rules_and_pool("example", "ci")
    assert render_oke_cloud_init(rules, pool, " \n") == render_oke_cloud_init(rules, pool)


def test_the_boot_script_fetches_oke_init_over_ipv4_then_ipv6_and_runs_it_with_the_flags() -> None:
    rules, pool = rules_and_pool("example", "ci")
    script = render_oke_bootstrap_script(rules, pool)
    assert (
        "for url in 'http://169.254.169.254/opc/v2/instance/metadata/oke_init_script' "
        "'http://[fd00:c1::a9fe:a9fe]/opc/v2/instance/metadata/oke_init_script'; do"
    ) in script
    assert (
        '-H "Authorization: Bearer Oracle" -L0 "$url" | base64 --decode >/var/run/oke-init.sh'
    ) in script
    assert "bash /var/run/oke-init.sh --kubelet-extra-args '--register-with-taints=" in script


def test_ubuntu_images_join_with_oke_bootstrap_and_the_same_flags() -> None:
    rules, pool = rules_and_pool("example", "ci")
    script = render_oke_bootstrap_script(rules, pool, "ubuntu")
    flags = kubelet_extra_args(rules, pool)
    assert f"\noke bootstrap --kubelet-extra-args '{flags}'\n" in script
    assert "oke-init.sh" not in script
    assert "169.254.169.254" not in script


@pytest.mark.parametrize(("rule_set", "pool"), OKE_POOLS)
def test_ubuntu_cloud_init_matches_golden(rule_set: str, pool: str) -> None:
    rules, node_pool = rules_and_pool(rule_set, pool)
    check_golden(
        f"{rule_set}/{pool}.ubuntu.cloud-init.sh",
        render_oke_cloud_init(rules, node_pool, image_family="ubuntu"),
    )


def test_an_unknown_image_family_is_refused() -> None:
    rules, pool = rules_and_pool("example", "ci")
    with pytest.raises(BootstrapError, match="image family 'debian' is not one of"):
        render_oke_bootstrap_script(rules, pool, "debian")  # type: ignore[arg-type]


def test_user_cloud_config_and_ours_form_a_valid_multipart_archive(
    user_cloud_config: str,
) -> None:
    rules, pool = rules_and_pool("example", "gpu")
    parts = _parts(render_oke_cloud_init(rules, pool, user_cloud_config))
    assert [(p.get_content_type(), p.get_filename()) for p in parts] == [
        ("text/cloud-config", USER_CLOUD_CONFIG_FILENAME),
        ("text/x-shellscript", NODEGATE_SCRIPT_FILENAME),
    ]
    cloud_config = _text(parts[0])
    assert cloud_config.startswith("#cloud-config\n")
    assert yaml.safe_load(cloud_config)["runcmd"] == [["systemctl", "daemon-reload"]]
    assert _text(parts[1]) == render_oke_bootstrap_script(rules, pool)


def test_a_user_script_runs_as_its_own_shellscript_part(user_script: str) -> None:
    rules, pool = rules_and_pool("example", "gpu")
    parts = _parts(render_oke_cloud_init(rules, pool, user_script))
    assert [(p.get_content_type(), p.get_filename()) for p in parts] == [
        ("text/x-shellscript", USER_SCRIPT_FILENAME),
        ("text/x-shellscript", NODEGATE_SCRIPT_FILENAME),
    ]
    assert _text(parts[0]) == user_script


def test_cloud_init_sees_the_archive_as_mime() -> None:
    # cloud-init treats user_data as MIME when "mime-version:" is in its first 4096 bytes.
    rules, pool = rules_and_pool("example", "gpu")
    user_data = render_oke_cloud_init(rules, pool, "#!/bin/sh\ntrue\n")
    assert user_data.startswith("Content-Type: multipart/mixed;")
    assert "mime-version:" in user_data[:4096].lower()


def test_the_plain_script_is_not_mistaken_for_mime() -> None:
    rules, pool = rules_and_pool("example", "gpu")
    assert "mime-version:" not in render_oke_cloud_init(rules, pool).lower()


def test_nodegate_runs_after_the_user_script_and_after_runcmd() -> None:
    # scripts-user runs the instance's scripts directory in sorted filename order; cloud-config
    # runcmd lands there as "runcmd".
    assert sorted([NODEGATE_SCRIPT_FILENAME, USER_SCRIPT_FILENAME, "runcmd"]) == [
        USER_SCRIPT_FILENAME,
        "runcmd",
        NODEGATE_SCRIPT_FILENAME,
    ]


def test_non_ascii_user_content_travels_base64_and_arrives_intact() -> None:
    rules, pool = rules_and_pool("example", "gpu")
    user = '#cloud-config\nwrite_files:\n  - path: /etc/motd\n    content: "Grüße ✓"\n'
    user_data = render_oke_cloud_init(rules, pool, user)
    assert user_data.isascii()
    part = _parts(user_data)[0]
    assert part["Content-Transfer-Encoding"] == "base64"
    assert _text(part) == user


# Refusals -----------------------------------------------------------------------------------


def _incompressible_script(size: int) -> str:
    """A script of `size` random base64 characters: gzip cannot make it fit."""
    noise = base64.b64encode(random.Random(12).randbytes(size * 3 // 4)).decode()
    lines = [noise[i : i + 76] for i in range(0, len(noise), 76)]
    return "#!/bin/bash\n" + "".join(f"# {line}\n" for line in lines)


def _ordinary_cloud_config() -> str:
    """A large but ordinary cloud-config: many small config files, as a real pool might write."""
    files = "".join(
        f"  - path: /etc/example/conf.d/{i:03d}-service.conf\n"
        f"    permissions: '0644'\n"
        f"    content: |\n"
        f"      [service-{i}]\n"
        f"      endpoint = https://service-{i}.internal.example.com:8443/api/v1\n"
        f"      timeout_seconds = 30\n"
        f"      retries = 5\n"
        for i in range(150)
    )
    return f"#cloud-config\nwrite_files:\n{files}"


def test_user_data_that_fits_neither_plain_nor_gzipped_is_refused_naming_pool_and_sizes() -> None:
    rules, pool = rules_and_pool("example", "gpu")
    with pytest.raises(UserDataTooLargeError) as caught:
        render_oke_cloud_init(rules, pool, _incompressible_script(30_000))
    err = caught.value
    assert (err.pool, err.limit) == ("gpu", user_data_budget(rules, pool))
    assert err.size > err.limit
    assert err.gzipped_size is not None
    assert err.gzipped_size > err.limit
    assert "pool 'gpu'" in str(err)
    assert f"{err.size:,} bytes" in str(err)
    assert f"{err.limit:,}" in str(err)


def test_the_user_data_budget_leaves_room_for_the_kubelet_extra_args_metadata() -> None:
    rules, pool = rules_and_pool("example", "gpu")
    metadata = oke_node_metadata(rules, pool)
    used = len("kubelet-extra-args") + len(metadata["kubelet-extra-args"])
    assert user_data_budget(rules, pool) == OKE_USER_DATA_BUDGET - used


def test_the_budget_leaves_room_for_okes_own_metadata_keys() -> None:
    assert OKE_USER_DATA_BUDGET == OCI_METADATA_LIMIT - 8_000


def test_user_data_that_fits_is_stored_plain_base64() -> None:
    rules, pool = rules_and_pool("example", "ci")
    user_data = render_oke_cloud_init(rules, pool)
    plain = base64.b64encode(user_data.encode()).decode()

    payload = metadata_payload("ci", user_data, limit=len(plain))

    assert payload == plain


def test_user_data_one_byte_over_is_gzipped_and_reads_back_identical() -> None:
    rules, pool = rules_and_pool("example", "ci")
    user_data = render_oke_cloud_init(rules, pool)
    plain = base64.b64encode(user_data.encode()).decode()

    payload = metadata_payload("ci", user_data, limit=len(plain) - 1)

    assert base64.b64decode(payload)[:2] == b"\x1f\x8b"  # what cloud-init detects
    assert decode_payload(payload) == user_data


def test_gzip_makes_a_large_ordinary_cloud_config_fit_and_is_deterministic() -> None:
    rules, pool = rules_and_pool("example", "gpu")
    user = _ordinary_cloud_config()
    user_data = render_oke_cloud_init(rules, pool, user)
    plain_size = len(base64.b64encode(user_data.encode()))

    payload = metadata_payload("gpu", user_data)

    print(
        f"user cloud-config {len(user.encode()):,} B; user_data {len(user_data.encode()):,} B raw, "
        f"{plain_size:,} B base64, {len(payload):,} B base64 gzip"
    )
    assert plain_size > OKE_USER_DATA_BUDGET
    assert base64.b64decode(payload)[:2] == b"\x1f\x8b"
    assert len(payload) <= OKE_USER_DATA_BUDGET
    assert decode_payload(payload) == user_data
    assert metadata_payload("gpu", user_data) == payload


def test_a_user_part_that_runs_oke_init_itself_is_refused() -> None:
    rules, pool = rules_and_pool("example", "ci")
    user = "#!/bin/bash\nbash /var/run/oke-init.sh\n"
    with pytest.raises(BootstrapError, match="runs OKE's init script itself"):
        render_oke_cloud_init(rules, pool, user)


@pytest.mark.parametrize(
    ("user", "why"),
    [
        pytest.param("echo hi\n", "starts with 'echo hi'", id="no-header"),
        pytest.param("#cloud-config\nruncmd: [\n", "not valid YAML", id="broken-yaml"),
        pytest.param("#cloud-config\n- a\n- b\n", "must be a YAML mapping", id="yaml-list"),
        pytest.param(
            "#!/bin/sh\necho --==nodegate-user-data==\n", "contains the MIME boundary", id="mime"
        ),
    ],
)
def test_user_parts_cloud_init_could_not_use_are_refused(user: str, why: str) -> None:
    rules, pool = rules_and_pool("example", "ci")
    with pytest.raises(BootstrapError, match=why):
        render_oke_cloud_init(rules, pool, user)


def test_an_aks_pool_gets_no_oke_user_data() -> None:
    rules, pool = rules_and_pool("example", "batch")
    with pytest.raises(BootstrapError, match="'batch' is an aks pool"):
        render_oke_cloud_init(rules, pool)


# Determinism --------------------------------------------------------------------------------


@pytest.mark.parametrize(("rule_set", "pool"), OKE_POOLS)
def test_the_same_input_renders_byte_identical(
    rule_set: str, pool: str, user_cloud_config: str
) -> None:
    first, second = (rules_and_pool(rule_set, pool) for _ in range(2))
    assert render_oke_cloud_init(*first, user_cloud_config) == render_oke_cloud_init(
        *second, user_cloud_config
    )


def _example_text() -> str:
    return files("nodegate.examples").joinpath("rules.yaml").read_text(encoding="utf-8")


def test_a_rules_edit_that_does_not_touch_a_pool_leaves_its_rendering_alone() -> None:
    before = example_rules()
    edited_text = (
        _example_text()
        .replace('value: "true", effect: PreferNoSchedule', "value: maybe, effect: NoExecute")
        .replace("timeout: 10m", "timeout: 12m")
        + "    - name: extra\n      provider: oke\n      size: 1\n"
        + "      labels: {example.com/capacity: spot}\n"
    )
    after = parse_rules(edited_text, "edited.yaml")
    assert after != before
    for name in ("ci", "gpu"):
        pool_before, pool_after = before.pool(name), after.pool(name)
        assert pool_before is not None
        assert pool_after is not None
        assert render_oke_cloud_init(after, pool_after) == render_oke_cloud_init(
            before, pool_before
        )


def test_a_rules_edit_that_touches_a_pool_changes_its_rendering() -> None:
    before = example_rules()
    after = parse_rules(
        _example_text().replace("value: ci, effect: NoSchedule", "value: ci, effect: NoExecute"),
        "edited.yaml",
    )
    pool_before, pool_after = before.pool("ci"), after.pool("ci")
    assert pool_before is not None
    assert pool_after is not None
    assert render_oke_cloud_init(after, pool_after) != render_oke_cloud_init(before, pool_before)


def test_the_order_of_rules_and_labels_in_the_file_does_not_change_the_rendering() -> None:
    text = _example_text()
    reordered = text.replace(
        "labels: {example.com/accelerator: nvidia, persist.example.com/team: ml}",
        "labels: {persist.example.com/team: ml, example.com/accelerator: nvidia}",
    )
    # Move the last label rule (spot-capacity) to the front of labelTaints.
    spot = (
        "    - name: spot-capacity\n"
        "      match: {labels: {example.com/capacity: spot}}\n"
        '      taint: {key: example.com/spot, value: "true", effect: PreferNoSchedule}\n'
        "      nodeMayLift: true\n"
    )
    assert spot in reordered
    reordered = reordered.replace(spot, "").replace("  labelTaints:\n", "  labelTaints:\n" + spot)
    before, after = example_rules(), parse_rules(reordered, "reordered.yaml")
    assert after != before
    for name in ("ci", "gpu"):
        pool_before, pool_after = before.pool(name), after.pool(name)
        assert pool_before is not None
        assert pool_after is not None
        assert render_oke_cloud_init(after, pool_after) == render_oke_cloud_init(
            before, pool_before
        )


# Documentation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "golden",
    ["example/gpu.cloud-init.sh", "example/batch.aks.json"],
)
def test_the_examples_in_docs_bootstrap_md_are_the_current_renderings(golden: str) -> None:
    docs = (GOLDEN.parents[3] / "docs" / "bootstrap.md").read_text(encoding="utf-8")
    assert (GOLDEN / golden).read_text(encoding="utf-8") in docs
