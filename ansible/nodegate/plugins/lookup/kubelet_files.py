"""Lookup `nodegate.nodegate.kubelet_files`: a pool's kubelet files, made by nodegate.bootstrap.

The Ansible shell around `nodegate.bootstrap.kubelet_files.kubelet_files`: find the rules file on
the controller, validate it as `nodegate validate` does, render, return plain data. Nothing about
taints or labels is decided here or in the role's Jinja.
"""

from __future__ import annotations

from typing import Any

import yaml
from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

# The collection is the shell; the Python package is where the rules are understood. Its absence
# is reported when the lookup runs, so `ansible-doc` and ansible-lint still read this file.
NODEGATE_MISSING: ImportError | None = None
try:
    from nodegate.bootstrap.errors import BootstrapError
    from nodegate.bootstrap.kubelet_files import kubelet_files
    from nodegate.core.rules.loader import load_rules
    from nodegate.core.text.errors import RulesError
except ImportError as err:
    NODEGATE_MISSING = err

DOCUMENTATION = r"""
name: kubelet_files
author: nodegate
short_description: The kubelet files that make a node register with its pool's taints and labels
description:
  - Reads a nodegate rules file on the controller and renders, for one pool, the kubelet
    environment file (C(KUBELET_EXTRA_ARGS)) and, in C(config) mode, the
    C(KubeletConfiguration) drop-in with C(registerWithTaints).
  - The taints and labels come from the Python package C(nodegate) (C(nodegate.bootstrap)),
    which must be installed in the Python that runs Ansible.
  - Invalid rules fail with the same lines as C(nodegate validate), each with file, line and
    column.
options:
  _terms:
    description: The rules file (YAML), looked up next to the playbook and in C(files/).
    required: true
    type: str
  pool:
    description: Name of a pool in the rules' C(nodePools).
    required: true
    type: str
  mode:
    description: C(flags) (both registration flags) or C(config) (a KubeletConfiguration drop-in).
    type: str
    default: flags
    choices: [flags, config]
  config_dir:
    description: The kubelet's C(--config-dir) (C(config) mode).
    type: str
    default: /etc/kubernetes/kubelet.conf.d
  extra_args:
    description: Other kubelet flags the environment file must keep.
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Show what the gpu pool's nodes register with
  ansible.builtin.debug:
    msg: "{{ lookup('nodegate.nodegate.kubelet_files', 'rules.yaml', pool='gpu') }}"
"""

RETURN = r"""
_raw:
  description: One mapping.
  type: list
  elements: dict
  contains:
    env_file:
      description: The environment file's whole text.
      type: str
    config_dropin:
      description: The drop-in's whole text in C(config) mode, else null.
      type: str
    taints:
      description: The registration taints (key, value, effect).
      type: list
    labels:
      description: The registration labels.
      type: dict
"""


class LookupModule(LookupBase):  # type: ignore[misc]  # ansible-core has no type hints
    """Errors are raised `from None`: Ansible prints an exception's whole cause chain, and each
    message here already says everything (the chain would repeat it, pydantic's text included).

    Render one pool's kubelet files."""

    def run(
        self, terms: list[str], variables: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[dict[str, Any]]:
        if NODEGATE_MISSING is not None:
            raise AnsibleLookupError(
                f"the Python package nodegate is not importable by the Python running Ansible "
                f"({NODEGATE_MISSING}); install it there: pip install 'nodegate[ansible]'"
            )
        given_pool = kwargs.get("pool")  # before set_options turns True into 'True'
        self.set_options(var_options=variables, direct=kwargs)
        if len(terms) != 1:
            raise AnsibleLookupError("give exactly one rules file")
        path = self.find_file_in_search_path(variables or {}, "files", terms[0], True)
        source = path or terms[0]  # not found: load_rules says so, as `nodegate validate` does
        try:
            rules = load_rules(source)
        # The lines `nodegate validate` prints: every problem with file:line:column.
        except RulesError as err:
            raise AnsibleLookupError(str(err)) from None
        name = self.get_option("pool")
        pool = rules.pool(name)
        if pool is None and not isinstance(given_pool, str):
            raise AnsibleLookupError(f"{source}: {_not_a_name(given_pool, rules)}")
        if pool is None:
            known = ", ".join(p.name for p in rules.node_pools) or "(none)"
            raise AnsibleLookupError(
                f"{source}: no pool named '{name}' in nodePools; the pools are: {known}"
            )
        try:
            files = kubelet_files(
                rules,
                pool,
                self.get_option("mode"),
                config_dir=self.get_option("config_dir"),
                extra_args=self.get_option("extra_args"),
            )
        # Permanent: the pool cannot be rendered as asked; the message says how to fix it.
        except BootstrapError as err:
            raise AnsibleLookupError(f"{source}: {err}") from None
        return [files.as_data()]


def _not_a_name(given: object, rules: Any) -> str:
    """Why a pool given as a boolean or a number names no pool: Ansible reads its YAML as 1.1
    (PyYAML), where a pool named `on` or `010` unquoted is True or 8, though the rules (YAML
    1.2) name it 'on' and '010'; the pools PyYAML reads as that value are the ones meant."""
    read = {p.name: yaml.safe_load(p.name) for p in rules.node_pools}
    meant = [
        name
        for name, value in read.items()
        if isinstance(value, bool) == isinstance(given, bool) and value == given
    ]
    example = meant[0] if meant else "<pool>"
    return (
        f"the pool is given as {given!r}, not a pool name: Ansible reads YAML 1.1, where an "
        "unquoted yes/no/on/off/y/n is a boolean and 010 the number 8; quote the pool name "
        f'where it is set (nodegate_pool: "{example}")'
    )
