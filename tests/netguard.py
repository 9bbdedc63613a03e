"""Keep a process on this machine: refuse any TCP connection beyond loopback.

Tests and benchmarks install it so that nothing they run can reach the network by accident.
"""

from __future__ import annotations

import ipaddress
import socket

_real_connect = socket.socket.connect


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def guard_loopback(who: str = "this process") -> None:
    """Make every later ``socket.connect`` to a non-loopback address raise ConnectionRefusedError.

    Args:
        who: Named in the error, e.g. ``"tests"``.
    """

    def connect(self: socket.socket, address: object) -> None:
        network = self.family in (socket.AF_INET, socket.AF_INET6) and isinstance(address, tuple)
        if network and not _is_loopback(str(address[0])):  # type: ignore[index]
            raise ConnectionRefusedError(f"{who} may not reach the network ({address[0]})")
        return _real_connect(self, address)

    socket.socket.connect = connect  # type: ignore[method-assign]
