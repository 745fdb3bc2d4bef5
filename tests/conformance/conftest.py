"""The ``store`` fixture: every conformance test runs once per backend registered in ``backends.py``."""

from __future__ import annotations

import pytest

from repertory.storage import SessionStore
from tests.conformance import backends

# The backend fixtures must be visible to pytest from here; registering one in backends.py is enough.
globals().update({name: getattr(backends, name) for name in backends.BACKENDS.values()})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "durable: run only against backends whose data outlives the store object")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "store" not in metafunc.fixturenames:
        return
    ids = list(backends.BACKENDS)
    if metafunc.definition.get_closest_marker("durable") is not None:
        ids = [i for i in ids if i in backends.DURABLE]
    metafunc.parametrize("store", [backends.BACKENDS[i] for i in ids], ids=ids, indirect=True)


@pytest.fixture
def store(request: pytest.FixtureRequest) -> SessionStore:
    """An open, empty store of the backend this test instance is parametrized with."""
    fixture_name: str = request.param
    return request.getfixturevalue(fixture_name)  # type: ignore[no-any-return]
