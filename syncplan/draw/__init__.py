"""Pictures of clusters and plans (SVG and PNG)."""
