"""What `pulumi up` runs (Pulumi.yaml `main: infra/`): a thin entry, the program lives in
`nodegate.infra.program` so it is importable and testable under the one `nodegate` namespace."""

from nodegate.infra.program import main

main()
