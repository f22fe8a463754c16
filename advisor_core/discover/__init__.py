"""Discovery: find what a user pointed at (profiles, IR dumps, configs) without reading it."""
