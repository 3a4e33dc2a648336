# The reconciler image: `nodegate reconcile` as a non-root user, fit for a read-only root FS.
# Build: docker build -t nodegate:<version> .   (`make image` does this with docker or podman;
# the tag follows the version in pyproject.toml; `make release-image` saves it as an OCI archive)
FROM python:3.11-slim AS build
# Set by `make release` (the commit's time): pip then compiles bytecode checked by hash, not by
# the install's file times, so two builds of one commit hold the same bytes.
ARG SOURCE_DATE_EPOCH
WORKDIR /src
# The context is the package sources and constraints.txt only (.dockerignore).
COPY . .
# The package and its runtime dependencies in a venv that the runtime stage copies whole: no
# wheels, build tools or pip cache end up in a layer of the image. One extra: `oci`, the SDK the
# reconciler reads OCI instance state with when configured (--oci-compartment); no other. Every
# distribution, and the build backend, at the version the committed lock pins (PIP_CONSTRAINT
# reaches pip's isolated build environment too).
RUN python -m venv --without-pip /opt/nodegate \
    && PIP_CONSTRAINT=/src/constraints.txt \
       pip --python /opt/nodegate/bin/python install --no-cache-dir ".[oci]"

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/nodegate/bin:$PATH
COPY --from=build /opt/nodegate /opt/nodegate
RUN useradd --uid 65532 --no-create-home --shell /usr/sbin/nologin nodegate
# Nothing is written at run time: no bytecode, no temp files, logs go to stderr.
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["python", "-m", "nodegate.cli", "reconcile"]
