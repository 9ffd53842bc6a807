"""Hypothesis profiles: "ci" (no deadline, 100 examples) is loaded by default."""

from hypothesis import settings

settings.register_profile("ci", deadline=None, max_examples=100)
settings.load_profile("ci")


# anyio's pytest plugin runs `@pytest.mark.anyio` tests on the backends this fixture names.
import pytest  # noqa: E402


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True, scope="session")
def _private_config_dir(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every server the tests start keeps its stored credentials (SPEC 4.4) in a directory of
    the run's own, never in the user's config directory: `logout` removes them."""
    import os

    os.environ["ACP_SERVER_CONFIG_DIR"] = str(tmp_path_factory.mktemp("config"))
