"""Training-config documents: round-trip YAML (``document``) and, later, a typed view (``training``)."""
