"""Fixtures of the A2A client tests: the ``a2a-sdk`` peer on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.a2a.helpers import Peer, peer_process


@pytest.fixture
def peer(tmp_path: Path) -> Iterator[Peer]:
    """A fresh peer process whose log lives in the test's folder."""
    with peer_process(tmp_path / "peer.log") as running:
        yield running
