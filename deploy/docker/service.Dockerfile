# The planning service. Build from the repository root:
#   docker build -f deploy/docker/service.Dockerfile -t syncplan-service .
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY core core
COPY planner planner
COPY api api
COPY agents agents
COPY executor executor
COPY syncplan syncplan
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[api,postgres]"

FROM python:3.11-slim
RUN useradd --uid 10001 --user-group --home-dir /var/lib/syncplan --create-home \
        --shell /usr/sbin/nologin syncplan
COPY --from=build /wheels /wheels
COPY --from=build /src/LICENSE /usr/share/licenses/syncplan/LICENSE
RUN pip install --no-cache-dir --no-index --find-links=/wheels "syncplan[api,postgres]" \
    && rm -rf /wheels
USER 10001
WORKDIR /var/lib/syncplan
# SQLite for a single replica; several replicas share PostgreSQL (SYNCPLAN_DATABASE_URL).
ENV SYNCPLAN_DATABASE_URL=sqlite:////var/lib/syncplan/syncplan.db PYTHONUNBUFFERED=1
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s CMD ["python3", "-c", "import urllib.request as u; u.urlopen('http://127.0.0.1:8080/healthz', timeout=2)"]
ENTRYPOINT ["syncplan"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8080"]
