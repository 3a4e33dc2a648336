"""Keep kube-apiserver's Lease param informer alive for the whole session.

kube-apiserver 1.36 stops the shared informer of a built-in param kind as soon as no
ValidatingAdmissionPolicyBinding uses that kind for one refresh (about a second), and never
starts it again: every later policy with a Lease param sees the Leases as they were then
(kubernetes/kubernetes#130887; 1.37 falls back to a direct read for a missing param only).
Tests install and uninstall nodegate's fence policy (helm uninstall, the manifests' tests)
on a control plane shared by the session, so one uninstall would leave every later fenced
test with a stale view. A binding that matches nothing keeps the informer running, as a
cluster where nodegate's own binding stays installed does.
"""

from __future__ import annotations

from kubernetes import client as k8s_client

NAME = "test-session-lease-params"


def keep_lease_params_watched(api_client: k8s_client.ApiClient) -> None:
    admission = k8s_client.AdmissionregistrationV1Api(api_client)
    admission.create_validating_admission_policy(
        {  # type: ignore[arg-type]  # the client takes the plain JSON
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": NAME},
            "spec": {
                "paramKind": {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"},
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["UPDATE"],
                            "resources": ["nodes"],
                        }
                    ]
                },
                "matchConditions": [{"name": "nobody", "expression": "false"}],
                "validations": [{"expression": "true"}],
            },
        }
    )
    admission.create_validating_admission_policy_binding(
        {  # type: ignore[arg-type]
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": NAME},
            "spec": {
                "policyName": NAME,
                "paramRef": {
                    "name": NAME,
                    "namespace": "default",
                    "parameterNotFoundAction": "Allow",
                },
                "validationActions": ["Deny"],
            },
        }
    )
