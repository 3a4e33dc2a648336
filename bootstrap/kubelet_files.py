"""The kubelet files of a node nodegate does not create (self-managed, bare metal, VMs).

Nodes in OKE and AKS pools get their registration taints and labels from the pool's bootstrap;
a node that joins by itself (kubeadm, an OKE self-managed node, a VM next to an AKS cluster)
gets them from files on the node, written by the Ansible role `nodegate.nodegate.kubelet` from
the text made here, so the taints and labels come from the same derivation as every other
bootstrap (`registration_taints`, `registration_labels`) and are proven to read back.

Two modes, chosen by the role's `nodegate_kubelet_mode`:

* `flags`: an environment file setting `KUBELET_EXTRA_ARGS` to `--register-with-taints=…
  --node-labels=…`. It is the file kubeadm documents for a node's own flags (/etc/default/kubelet
  from the deb packages, /etc/sysconfig/kubelet from the rpm ones), read by their kubelet unit.
* `config`: a `KubeletConfiguration` drop-in with `registerWithTaints` in the kubelet's
  `--config-dir` (kubelet 1.30 or later: beta and on by default there, GA in 1.35), and the
  environment file carrying `--config-dir` and `--node-labels` (labels have no config field).
"""

from __future__ import annotations

from dataclasses import dataclass
from io import StringIO
from typing import Any, Final

from ruamel.yaml import YAML
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from nodegate.bootstrap.errors import BootstrapError
from nodegate.bootstrap.kubelet_flags import NODE_LABELS, REGISTER_WITH_TAINTS, proven_kubelet_flags
from nodegate.bootstrap.registration import registration_labels, registration_taints
from nodegate.core.rules.model import NodePool, NodeRules, Taint

KUBELET_MODES: Final = ("flags", "config")
ENV_VAR: Final = "KUBELET_EXTRA_ARGS"
"""The variable the kubeadm packages' kubelet unit appends to kubelet's command line."""
CONFIG_DIR_FLAG: Final = "--config-dir"
DEFAULT_CONFIG_DIR: Final = "/etc/kubernetes/kubelet.conf.d"
KUBELET_CONFIG_API_VERSION: Final = "kubelet.config.k8s.io/v1beta1"
_OWNED_FLAGS: Final = (REGISTER_WITH_TAINTS, NODE_LABELS, CONFIG_DIR_FLAG)
_UNSAFE_IN_QUOTES: Final = frozenset('"\\$`\n\r')
"""Characters systemd or a shell would interpret inside the double-quoted value."""


@dataclass(frozen=True)
class KubeletFiles:
    """What to write on a node of one pool, and what it will register with."""

    env_file: str
    """`KUBELET_EXTRA_ARGS="…"` with a header; the whole file."""
    config_dropin: str | None
    """The `KubeletConfiguration` drop-in (config mode), else None."""
    taints: tuple[Taint, ...]
    labels: dict[str, str]

    def as_data(self) -> dict[str, Any]:
        """Plain data for Ansible (a lookup's result)."""
        return {
            "env_file": self.env_file,
            "config_dropin": self.config_dropin,
            "taints": [_taint_data(t) for t in self.taints],
            "labels": dict(self.labels),
        }


def kubelet_files(
    rules: NodeRules,
    pool: NodePool,
    mode: str,
    *,
    config_dir: str = DEFAULT_CONFIG_DIR,
    extra_args: str = "",
) -> KubeletFiles:
    """The files for `pool`'s nodes; BootstrapError naming the pool and the fix if they cannot
    be written as asked. `extra_args` are other kubelet flags the environment file must keep."""
    owner = f"pool '{pool.name}'"
    if mode not in KUBELET_MODES:
        raise BootstrapError(f"{owner}: kubelet mode '{mode}' is not one of flags, config")
    _check_extra_args(owner, extra_args)
    taints = registration_taints(rules, pool)
    labels = registration_labels(pool)
    header = _header(pool, mode)
    if mode == "flags":
        flags = proven_kubelet_flags(taints, labels, owner)
        return KubeletFiles(_env_file(header, flags, extra_args), None, taints, labels)
    if not config_dir.startswith("/") or any(ch.isspace() for ch in config_dir):
        raise BootstrapError(
            f"{owner}: kubelet config directory '{config_dir}' must be an absolute path "
            "without spaces (it is passed as --config-dir)"
        )
    flags = (f"{CONFIG_DIR_FLAG}={config_dir}", *proven_kubelet_flags((), labels, owner))
    dropin = _config_dropin(header, taints)
    return KubeletFiles(_env_file(header, flags, extra_args), dropin, taints, labels)


def _check_extra_args(owner: str, extra_args: str) -> None:
    unsafe = sorted(set(extra_args) & _UNSAFE_IN_QUOTES)
    if unsafe:
        raise BootstrapError(
            f"{owner}: extra kubelet args contain {', '.join(map(repr, unsafe))}; they are "
            "written inside double quotes where systemd and shells interpret those: leave "
            "them out"
        )
    for word in extra_args.split():
        name = word.partition("=")[0]
        if name in _OWNED_FLAGS:
            fix = (
                "give the directory as the config directory (nodegate_kubelet_config_dir) instead"
                if name == CONFIG_DIR_FLAG
                else "put the taints and labels in the rules file instead"
            )
            raise BootstrapError(
                f"{owner}: extra kubelet args set {name}, which nodegate writes; {fix}"
            )


def _header(pool: NodePool, mode: str) -> list[str]:
    return [
        f"Written by nodegate (Ansible role nodegate.nodegate.kubelet, mode {mode}) for pool "
        f"'{pool.name}'.",
        "Do not edit: change the rules file and run the role again. kubelet reads registration",
        "taints and labels only when the node first registers.",
    ]


def _env_file(header: list[str], flags: tuple[str, ...], extra_args: str) -> str:
    words = [*flags, *extra_args.split()]
    comments = "".join(f"# {line}\n" for line in header)
    return f'{comments}{ENV_VAR}="{" ".join(words)}"\n'


def _taint_data(taint: Taint) -> dict[str, str]:
    """A taint as KubeletConfiguration's registerWithTaints (core/v1 Taint) writes it."""
    data = {"key": taint.key, "value": taint.value, "effect": taint.effect}
    return data if taint.value else {"key": taint.key, "effect": taint.effect}


def _config_dropin(header: list[str], taints: tuple[Taint, ...]) -> str:
    """The drop-in; without taints it sets nothing, so it overrides nothing of the base config
    (a drop-in's list replaces the base config's list)."""
    config: dict[str, Any] = {
        "apiVersion": KUBELET_CONFIG_API_VERSION,
        "kind": "KubeletConfiguration",
    }
    if taints:
        # Quoted, because kubelet reads YAML 1.1, where a taint value such as `yes`, `on` or
        # `n` unquoted is a boolean.
        config["registerWithTaints"] = [
            {k: DoubleQuotedScalarString(v) for k, v in _taint_data(t).items()} for t in taints
        ]
    yaml = YAML(typ="rt")  # round-trip: keeps the key order kubelet's docs use
    yaml.default_flow_style = False
    yaml.indent(mapping=2, sequence=4, offset=2)
    out = StringIO()
    yaml.dump(config, out)
    text = "".join(f"# {line}\n" for line in header) + out.getvalue()
    if read_config_dropin_taints(text) != taints:  # the same proof as the flags get
        raise BootstrapError(f"registerWithTaints would not read back as {taints}")
    return text


def read_config_dropin_taints(text: str) -> tuple[Taint, ...]:
    """`registerWithTaints` of a drop-in as kubelet reads it: YAML 1.1 (sigs.k8s.io/yaml), a
    value that is not a string refused as kubelet refuses it, an absent value empty."""
    yaml = YAML(typ="safe", pure=True)
    yaml.version = (1, 1)
    data = yaml.load(text) or {}
    for taint in data.get("registerWithTaints", []):
        if not all(isinstance(v, str) for v in taint.values()):
            raise BootstrapError(f"registerWithTaints: {taint} has a value that is not a string")
    return tuple(
        Taint.model_construct(key=t["key"], value=t.get("value", ""), effect=t["effect"])
        for t in data.get("registerWithTaints", [])
    )
