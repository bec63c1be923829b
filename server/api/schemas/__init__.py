"""Request and response models of the HTTP API (pydantic)."""
