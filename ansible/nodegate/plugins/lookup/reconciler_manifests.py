"""Lookup `nodegate.nodegate.reconciler_manifests`: the reconciler's objects, from the one builder.

The Ansible shell around `nodegate.manifests.build.build_manifests`, the builder behind `pulumi up`,
`nodegate manifests` and deploy/reconciler.yaml: read and validate the rules file on the
controller, validate the settings (the schema of the Pulumi stack's `nodegate:reconciler`),
return the objects for `kubernetes.core.k8s`. There is no other copy of the manifests. With
`part=rules`, the rules as the NodeRules object instead (`nodegate.manifests.build.rules_object`),
when the settings say `rulesSource: objects`; the role applies it once the CRD the installation
ships is Established.
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

# The collection is the shell; the Python package is where the rules are understood. Its absence
# is reported when the lookup runs, so `ansible-doc` and ansible-lint still read this file.
NODEGATE_MISSING: ImportError | None = None
try:
    from pydantic import ValidationError

    from nodegate.core.rules.loader import RulesDocument
    from nodegate.core.text.errors import RulesError, format_path
    from nodegate.core.text.located_errors import located_errors
    from nodegate.core.text.yaml_input import decode, read_limited
    from nodegate.manifests.build import build_manifests, rules_object
    from nodegate.manifests.settings import DeploySettings, SettingsError
except ImportError as err:
    NODEGATE_MISSING = err

DOCUMENTATION = r"""
name: reconciler_manifests
author: nodegate
short_description: The nodegate reconciler's Kubernetes objects for a rules file
description:
  - Builds the reconciler's objects (Namespace, ServiceAccount, RBAC, rules ConfigMap,
    Deployment, PodDisruptionBudget, metrics Service, ...) with the Python package
    C(nodegate) (C(nodegate.manifests)), exactly as C(nodegate manifests) and C(pulumi up) do.
  - The rules ConfigMap holds the rules file's text byte for byte.
  - Invalid rules fail with the same lines as C(nodegate validate); invalid settings name
    each place and the fix.
options:
  _terms:
    description: The rules file (YAML), looked up next to the playbook and in C(files/).
    required: true
    type: str
  settings:
    description:
      - Deployment settings, the schema of the Pulumi stack's C(nodegate:reconciler)
        (camelCase keys; C(image.repository) is required). See docs/infra.md.
    type: dict
    required: true
  settings_name:
    description: What to call the settings in error messages.
    type: str
    default: settings
  part:
    description:
      - C(installation) is the reconciler's objects in apply order, the NodeRules CRD first
        (with C(rulesSource=objects), no rules ConfigMap).
      - C(rules) is the rules as a NodeRules object, labelled as the installation's, when the
        settings say C(rulesSource=objects); none otherwise (the rules ConfigMap holds them).
        Apply it once the NodeRules CRD is Established.
    type: str
    choices: [installation, rules]
    default: installation
"""

EXAMPLES = r"""
- name: Deploy the reconciler
  kubernetes.core.k8s:
    definition: >-
      {{ query('nodegate.nodegate.reconciler_manifests', 'rules.yaml',
               settings={'image': {'repository': 'registry.example.com/nodegate'}}) }}
    apply: true

- name: The rules as a NodeRules object (rulesSource objects; after the CRD is Established)
  kubernetes.core.k8s:
    definition: >-
      {{ query('nodegate.nodegate.reconciler_manifests', 'rules.yaml', part='rules',
               settings={'image': {'repository': 'registry.example.com/nodegate'},
                         'rulesSource': 'objects'}) }}
    apply: true
"""

RETURN = r"""
_raw:
  description:
    - The objects in apply order (C(part=installation)).
    - The NodeRules object, or none (C(part=rules)).
  type: list
  elements: dict
"""


class LookupModule(LookupBase):  # type: ignore[misc]  # ansible-core has no type hints
    """Errors are raised `from None`: Ansible prints an exception's whole cause chain, and each
    message here already says everything (the chain would repeat it, pydantic's text included).

    Build the reconciler's objects."""

    def run(
        self, terms: list[str], variables: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[dict[str, Any]]:
        if NODEGATE_MISSING is not None:
            raise AnsibleLookupError(
                f"the Python package nodegate is not importable by the Python running Ansible "
                f"({NODEGATE_MISSING}); install it there: pip install 'nodegate[ansible]'"
            )
        self.set_options(var_options=variables, direct=kwargs)
        if len(terms) != 1:
            raise AnsibleLookupError("give exactly one rules file")
        source = self.find_file_in_search_path(variables or {}, "files", terms[0], True)
        source = source or terms[0]
        try:
            data = read_limited(source)
        # An unreadable file is reported as `nodegate validate` reports it.
        except OSError as err:
            raise AnsibleLookupError(f"{source}: cannot read file: {err.strerror}") from None
        try:
            document = RulesDocument.parse(decode(data, source), source)
        # The lines `nodegate validate` prints: every problem with file:line:column.
        except RulesError as err:
            raise AnsibleLookupError(str(err)) from None
        name = self.get_option("settings_name")
        try:
            settings = DeploySettings.model_validate(self.get_option("settings"))
        # Permanent: wrong settings; name each place and the fix.
        except ValidationError as err:
            raise AnsibleLookupError(
                "\n".join(
                    f"{name}: {format_path(e.path)}: {e.message}"
                    for e in located_errors(err, DeploySettings)
                )
            ) from None
        if self.get_option("part") == "rules":
            return [rules_object(document, settings)] if settings.rules_source == "objects" else []
        try:
            return build_manifests(document, settings)
        # Settings that cannot serve these rules (an access they read withheld): say the fix.
        except SettingsError as err:
            raise AnsibleLookupError(f"{name}: {err}") from None
