"""Which install extra provides a missing module, and the command that installs it.

syncplan is installed from a clone (``pip install -e ".[EXTRA]"``); the hints say so, and name
the one extra a command needs rather than ``all`` (which pulls torch).
"""

from __future__ import annotations

# import name -> the extra of pyproject.toml that installs it
EXTRA_OF_MODULE: dict[str, str] = {
    "networkx": "planner",
    "highspy": "planner",
    "numpy": "planner",
    "scipy": "planner",
    "yaml": "planner",
    "fastapi": "api",
    "uvicorn": "api",
    "pydantic_settings": "api",
    "sqlalchemy": "api",
    "httpx": "api",
    "prometheus_client": "api",
    "psycopg": "postgres",
    "pynvml": "agent",
    "torch": "executor",
    "matplotlib": "plot",
}

CPU_TORCH = "pip install torch --index-url https://download.pytorch.org/whl/cpu"


def install_hint(module: str | None) -> str:
    """The command that installs ``module`` (its top-level name) into a clone's environment."""
    top = (module or "").split(".", 1)[0]
    extra = EXTRA_OF_MODULE.get(top)
    if extra is None:
        return "install the extra the command needs: pip install -e '.[EXTRA]' (docs/install.md)"
    hint = f"pip install -e '.[{extra}]'"
    if extra == "executor":
        hint = f"{CPU_TORCH} (CPU-only machines; skip with a GPU), then {hint}"
    return hint
