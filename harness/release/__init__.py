"""`make release`: the artifacts a user installs, every one from the version in pyproject.toml.

Development tooling (harness/, never shipped): the wheel and the sdist, the chart's `.tgz`, the
image as an OCI archive when it can be built here, and SHA256SUMS over them, into dist/. The
runtime dependencies are pinned by the committed constraints.txt (`make constraints` writes it),
which the image build, `make setup` and the release's clean-venv check all install with.
"""
