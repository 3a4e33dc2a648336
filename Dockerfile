# The reconciler image: `nodegate reconcile` as a non-root user, fit for a read-only root FS.
# Build: docker build -t nodegate:0.1.0 .
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY core core
COPY bootstrap bootstrap
COPY reconciler reconciler
COPY infra infra
COPY manifests manifests
COPY cli cli
COPY templates templates
COPY examples examples
COPY localcluster localcluster
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels \
    && useradd --uid 65532 --no-create-home --shell /usr/sbin/nologin nodegate
# Nothing is written at run time: no bytecode, no temp files, logs go to stderr.
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["python", "-m", "nodegate.cli", "reconcile"]
