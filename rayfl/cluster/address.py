"""Refuse, within seconds, a ``ray.address`` nothing answers at.

``ray.init(address="no_such_host:1")`` retries for minutes (over 120 s seen),
printing Ray's own warnings, before it gives up (issue 45). Before connecting,
:class:`rayfl.cluster.session.RaySession` calls :func:`check_reachable`: the host must
resolve and accept a TCP connection on the port within
:data:`CONNECT_TIMEOUT_S`; otherwise :class:`ClusterUnreachable` says so in
one line. ``auto`` (the cluster ``ray start`` left on this machine) and an
address without a port are left to Ray.
"""

from __future__ import annotations

import socket

from rayfl.text_checks import ADDRESS, clip_text

__all__ = ["CONNECT_TIMEOUT_S", "ClusterUnreachable", "check_reachable", "host_port"]

#: Seconds the host's name lookup and TCP connection may take in all.
CONNECT_TIMEOUT_S = 10.0


class ClusterUnreachable(ValueError):
    """Nothing answers at ``ray.address``: printed in one line by ``rayfl``."""


def host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a ``host:port`` or ``ray://host:port`` address, else None.

    Example:
        >>> host_port("ray://head:10001"), host_port("[::1]:6379"), host_port("auto")
        (('head', 10001), ('::1', 6379), None)
    """
    match = ADDRESS.match(address.strip())
    if match is None:
        return None
    return match.group("host").strip("[]"), int(match.group("port"))


def check_reachable(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Raise :class:`ClusterUnreachable` unless ``address`` accepts a TCP connection.

    Raises:
        ClusterUnreachable: The host does not resolve, or refuses or does not
            answer the connection within ``timeout_s``.
    """
    parts = host_port(address)
    if parts is None:
        return
    host, port = parts
    shown = clip_text(address)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return
    except socket.gaierror as e:
        reason = f"host not found: {e.strerror or e}"
    except TimeoutError:
        reason = f"no answer within {timeout_s:g} s"
    except (OSError, ValueError, OverflowError) as e:
        reason = getattr(e, "strerror", None) or str(e)
    raise ClusterUnreachable(
        f"cannot reach the Ray cluster at {shown} ({reason}); check ray.address "
        "(or RAY_ADDRESS), or leave it unset for a local session"
    )
