"""Hypothesis profiles: "ci" (no deadline, 100 examples) is loaded by default."""

from hypothesis import settings

settings.register_profile("ci", deadline=None, max_examples=100)
settings.load_profile("ci")
