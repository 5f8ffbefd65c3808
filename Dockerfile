# The framework service: `outrigger serve` on port 50051 (gRPC: Scheduler API, Handle, CycleState, health).
#   docker build -t outrigger/framework:0.1.0 .
# Configuration files are mounted at /etc/outrigger (see docker-compose.yml and deploy/kubernetes/).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md ./
COPY pluginhost ./pluginhost
COPY framework ./framework
COPY clients ./clients
RUN pip install . && rm -rf /src
COPY deploy/healthcheck.py /usr/local/bin/outrigger-healthcheck

RUN useradd --system --uid 10001 --home-dir /var/lib/outrigger --create-home outrigger
USER 10001
WORKDIR /var/lib/outrigger

# 50051: gRPC (Scheduler API, Handle, CycleState, health); 10251: metrics and debug endpoints with --http.
EXPOSE 50051 10251
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["outrigger-healthcheck", "127.0.0.1:50051"]
ENTRYPOINT ["outrigger"]
CMD ["serve", "--listen", "0.0.0.0:50051"]
