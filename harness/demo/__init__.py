"""The demo: nodegate's whole job played on the local control plane (`nodegate demo`).

Development tooling, shipped in the `nodegate-harness` distribution (harness/), never in the
product package or the image: `nodegate demo` imports it only when it runs.
"""
