"""Renderers: turn reports and findings into text, JSON, SARIF, Markdown or GitHub output."""
