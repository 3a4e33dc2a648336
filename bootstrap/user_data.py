"""Assemble a node's cloud-init user_data: nodegate's boot script, plus the user's own part.

With no user part the script is the whole user_data. With one, both go into a multipart MIME
archive (cloud-init's format for several parts), so the user's part runs and the registration
flags still reach kubelet. The archive is deterministic (fixed boundary, no dates) so unchanged
input renders byte-identical and a diff of user_data is a diff of intent.

Order on the node: cloud-init writes `text/x-shellscript` parts into the instance's scripts
directory under their part filename, writes `runcmd` there as a file named `runcmd`, and
`scripts-user` runs that directory in sorted filename order. nodegate's part is named to sort
last, so everything the user asked for has run before the node registers.
"""

from __future__ import annotations

import base64
import gzip
from dataclasses import dataclass
from typing import Final, Literal

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from nodegate.bootstrap.errors import BootstrapError, UserDataTooLargeError
from nodegate.bootstrap.templating import render_template

OCI_METADATA_LIMIT: Final = 32_000
"""Bytes: OCI caps an instance's `metadata` + `extendedMetadata` at 32,000 bytes in total, and
`user_data` sits there base64-encoded (LaunchInstanceDetails.metadata in the OCI API)."""
OKE_RESERVED_METADATA: Final = 8_000
"""Bytes left for the keys OKE itself puts in each node's metadata next to user_data (its
`oke_init_script`, the API server address and CA certificate, ids, `ssh_authorized_keys`).
OKE does not document their size; this is a chosen reserve, not a measurement."""
OKE_USER_DATA_BUDGET: Final = OCI_METADATA_LIMIT - OKE_RESERVED_METADATA
"""What nodegate lets a pool's user_data take in the metadata, base64-encoded."""

MIME_BOUNDARY: Final = "==nodegate-user-data=="
USER_CLOUD_CONFIG_FILENAME: Final = "10-user-cloud-config.yaml"
USER_SCRIPT_FILENAME: Final = "10-user-script"
NODEGATE_SCRIPT_FILENAME: Final = "zz-nodegate-bootstrap"
"""Sorts after the user's script and after cloud-config's `runcmd` (C-locale order)."""

_MAX_7BIT_LINE = 998  # RFC 5322 line limit; longer lines go base64

ContentType = Literal["text/cloud-config", "text/x-shellscript"]


@dataclass(frozen=True)
class MimePart:
    """One part of the archive, already encoded for transport."""

    content_type: ContentType
    filename: str
    transfer_encoding: Literal["7bit", "base64"]
    body: str
    """Ends with a newline, so the part's payload keeps its own last newline."""


def mime_part(content_type: ContentType, filename: str, text: str) -> MimePart:
    """Plain ASCII stays readable (7bit); anything else is base64 so cloud-init reads it intact."""
    if _is_7bit(text):
        body = text if text.endswith("\n") else text + "\n"
        return MimePart(content_type, filename, "7bit", body + "\n")
    encoded = base64.encodebytes(text.encode("utf-8")).decode("ascii")  # 76-column lines
    return MimePart(content_type, filename, "base64", encoded)


def _is_7bit(text: str) -> bool:
    return (
        text.isascii()
        and "\r" not in text
        and "\0" not in text
        and all(len(line) <= _MAX_7BIT_LINE for line in text.split("\n"))
    )


def user_part(pool: str, text: str) -> MimePart:
    """The user's own cloud-init as a MIME part: a `#cloud-config` document or a `#!` script."""
    if "oke_init_script" in text or "oke-init.sh" in text or "oke bootstrap" in text:
        raise BootstrapError(
            f"pool '{pool}': the user cloud-init runs OKE's init script itself; remove those "
            "lines: nodegate runs oke-init.sh (or `oke bootstrap` on Ubuntu images) once, with "
            "the registration flags, and a second run would configure kubelet twice"
        )
    if text.startswith("#cloud-config"):
        _check_cloud_config(pool, text)
        return mime_part("text/cloud-config", USER_CLOUD_CONFIG_FILENAME, text)
    if text.startswith("#!"):
        return mime_part("text/x-shellscript", USER_SCRIPT_FILENAME, text)
    first = text.splitlines()[0] if text else ""
    raise BootstrapError(
        f"pool '{pool}': the user cloud-init starts with {first[:40]!r}; give a cloud-config "
        "document (first line '#cloud-config') or a script (first line '#!', e.g. "
        "'#!/bin/bash')"
    )


def _check_cloud_config(pool: str, text: str) -> None:
    """Refuse broken YAML now, not at boot where cloud-init would skip the whole part."""
    try:
        data = YAML(typ="safe", pure=True).load(text)
    except YAMLError as err:
        raise BootstrapError(
            f"pool '{pool}': the user cloud-config is not valid YAML: {err}"
        ) from err
    if data is not None and not isinstance(data, dict):
        raise BootstrapError(
            f"pool '{pool}': the user cloud-config must be a YAML mapping (keys such as "
            f"'write_files', 'runcmd'), not a {type(data).__name__}"
        )


def multipart(pool: str, parts: tuple[MimePart, ...]) -> str:
    """A cloud-init multipart/mixed archive of `parts`, in order."""
    delimiter = f"--{MIME_BOUNDARY}"
    for part in parts:
        if delimiter in part.body:
            raise BootstrapError(
                f"pool '{pool}': part {part.filename} contains the MIME boundary {delimiter!r}"
            )
    return render_template("user_data.mime.j2", boundary=MIME_BOUNDARY, parts=parts)


def metadata_payload(pool: str, user_data: str, limit: int = OKE_USER_DATA_BUDGET) -> str:
    """user_data base64-encoded for the instance metadata, within `limit` bytes.

    Plain when it fits, so what a node boots with stays readable in the console and in diffs;
    otherwise gzipped (cloud-init recognises gzip by its magic bytes and decompresses it, and
    Oracle's own OKE worker cloud-init is shipped gzipped). The gzip is deterministic
    (mtime 0, no file name), so the same user_data always gives the same bytes.
    Raises UserDataTooLargeError when neither form fits.
    """
    raw = user_data.encode("utf-8")
    plain = base64.b64encode(raw).decode("ascii")
    if len(plain) <= limit:
        return plain
    packed = base64.b64encode(gzip.compress(raw, compresslevel=9, mtime=0)).decode("ascii")
    if len(packed) <= limit:
        return packed
    raise UserDataTooLargeError(
        pool, size=len(plain), limit=limit, raw_size=len(raw), gzipped_size=len(packed)
    )
