"""advisor-aicpu: an example third-party advisor plugin (rule AIC001)."""

__version__ = "0.1.0"
