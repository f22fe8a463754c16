"""Derived analyses over the normalised model; each returns a DataFrame (HTA style)."""
