"""Built-in rules of the advisor, one module per rule.

Installed as the top-level package ``advisor_rules`` (the ``rules/`` directory
itself is not a package and never lands in site-packages).
"""
