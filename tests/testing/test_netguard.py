import socket

import pytest


def test_tests_cannot_reach_beyond_loopback():
    sock = socket.socket()
    try:
        with pytest.raises(ConnectionRefusedError, match="may not reach the network"):
            sock.connect(("192.0.2.1", 80))  # TEST-NET-1: never routed, never contacted
    finally:
        sock.close()


def test_loopback_stays_reachable(scripted_server):
    from urllib.request import urlopen

    with urlopen(scripted_server.url.removesuffix("/v1") + "/health", timeout=5) as response:
        assert response.status == 200
