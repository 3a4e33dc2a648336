"""Generic text machinery, knowing no rules: YAML in (with line marks) and out, errors located
in a file with a hint, flags, durations, Kubernetes names, the frozen pydantic base, and
nodegate's own JSON records in ConfigMaps. The bottom floor of core."""
