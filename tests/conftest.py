"""Hypothesis profiles: "ci" (no deadline, 100 examples) is loaded by default."""

from hypothesis import settings

settings.register_profile("ci", deadline=None, max_examples=100)
settings.load_profile("ci")


# anyio's pytest plugin runs `@pytest.mark.anyio` tests on the backends this fixture names.
import pytest  # noqa: E402


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
