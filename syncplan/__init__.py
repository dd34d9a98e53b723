"""syncplan: topology-aware synchronization planner for distributed deep learning."""

__version__ = "0.1.0"
