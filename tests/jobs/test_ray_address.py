"""An address no Ray cluster answers at is a usage error at once: `ray.init` retried
`--address 127.0.0.1:1` for minutes with only its own warnings."""

from __future__ import annotations

import socket

import pytest

from decide.jobs.ray_runner import check_reachable
from decide.jobs.spec import SpecError


def test_an_address_that_refuses_connections_is_a_usage_error() -> None:
    with socket.socket() as probe:  # a port nothing listens on: bound, never listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
            with pytest.raises(SpecError, match=f"--address {address}: no Ray cluster answers"):
                check_reachable(address, timeout=2.0)


def test_a_listening_address_and_rays_own_words_pass() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        check_reachable(f"127.0.0.1:{server.getsockname()[1]}", timeout=2.0)
    for address in (None, "", "auto", "local"):
        check_reachable(address)


def test_an_address_without_a_port_is_refused() -> None:
    with pytest.raises(SpecError, match="expected HOST:PORT"):
        check_reachable("headnode")
