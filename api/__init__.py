"""The central planning service: a FastAPI app over a SQL store (see docs/service.md)."""
