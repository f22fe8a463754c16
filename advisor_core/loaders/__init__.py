"""Loaders: one module per artifact family, each turning files into canonical tables.

Loaders read only what is asked (tables on demand, CSV columns projected into the
reader), never raise on bad input (diagnostics instead) and know nothing of rules.
See :mod:`advisor_core.loaders.registry` for the table catalogue.
"""
