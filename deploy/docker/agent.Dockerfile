# The node agent (NVML through the NVIDIA container runtime; /sys mounted read-only).
#   docker build -f deploy/docker/agent.Dockerfile -t syncplan-agent .
# GPU copy timing needs torch; without it the agent skips that probe (--no-gpu-copy).
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY core core
COPY planner planner
COPY api api
COPY agents agents
COPY executor executor
COPY syncplan syncplan
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[agent]"

FROM python:3.11-slim
RUN useradd --uid 10001 --user-group --home-dir /var/lib/syncplan-agent --create-home \
        --shell /usr/sbin/nologin syncplan
COPY --from=build /wheels /wheels
COPY --from=build /src/LICENSE /usr/share/licenses/syncplan/LICENSE
RUN pip install --no-cache-dir --no-index --find-links=/wheels "syncplan[agent]" \
    && rm -rf /wheels
USER 10001
ENV PYTHONUNBUFFERED=1
# 7470: peer probes; 9470: /metrics and /healthz
EXPOSE 7470 9470
ENTRYPOINT ["syncplan"]
CMD ["agent"]
