# The tokenpace CLI and gateway: a slim Python, a non-root user, the simulator's compiled hot path.
#   podman build -t tokenpace:latest .          (docker build works the same)
#   podman run --rm tokenpace:latest bench      (the built-in simulated engine)
#   podman run --rm -p 9000:9000 -p 9100:9100 tokenpace:latest gateway --listen 0.0.0.0:9000 \
#       --admin-listen 0.0.0.0:9100 --upstream prod=http://HOST:8000/v1
# deploy/k8s/gateway.yaml runs this image. BASE: a Debian-based image with python3 (3.10 or newer)
# and its venv module; tests/test_image.py builds on a local Debian one (--build-arg BASE=...).
ARG BASE=python:3.12-slim

FROM ${BASE} AS build
# A C compiler for mypyc; Python's headers too where the base has none (Debian's own python3).
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
    $(python3 -c 'import os, sysconfig; h = os.path.join(sysconfig.get_paths()["include"], "Python.h"); print("" if os.path.exists(h) else "python3-dev")') \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY tokenpace ./tokenpace
COPY scripts/build_native.py ./scripts/
# The runtime venv: the core dependencies and psycopg (the manifests' fleet shares a PostgreSQL store).
RUN python3 -m venv /opt/tokenpace \
 && /opt/tokenpace/bin/pip install --no-cache-dir --disable-pip-version-check '.[postgres]'
# mypyc in a venv of its own that also sees the runtime's packages (a .pth line), so none of the
# compiler ships; the compiled group goes beside the installed sources it was built from.
RUN site="$(/opt/tokenpace/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
 && python3 -m venv /opt/build \
 && echo "$site" > "$(/opt/build/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/runtime.pth" \
 && /opt/build/bin/pip install --no-cache-dir --disable-pip-version-check 'mypy>=2.4,<2.5' setuptools \
 && /opt/build/bin/python scripts/build_native.py \
 && cp -r tokenpace/sim/_compiled "$site/tokenpace/sim/" \
 && cd / && /opt/tokenpace/bin/python -c 'import tokenpace.sim.native as n; assert n.COMPILED_WANTED, "not compiled"'

FROM ${BASE}
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /home/tokenpace tokenpace \
 && mkdir -p /var/lib/tokenpace && chown tokenpace:tokenpace /var/lib/tokenpace
COPY --from=build /opt/tokenpace /opt/tokenpace
ENV PATH=/opt/tokenpace/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
# Numeric, so that Kubernetes' runAsNonRoot can verify it; results and the default store go under it.
USER 10001:10001
WORKDIR /var/lib/tokenpace
RUN python -c 'import tokenpace.sim.native as n; assert n.COMPILED_WANTED, "the compiled engine did not load"'
EXPOSE 9000 9100
ENTRYPOINT ["tokenpace"]
CMD ["--help"]
