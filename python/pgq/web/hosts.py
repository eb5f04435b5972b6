"""Which Host and Origin headers the dashboard serves: its defence against DNS rebinding.

A page whose DNS name is rebound to the dashboard's address is same-origin with it in the
victim's browser, but its requests still name the page's host in `Host`: only the
listening address (for a loopback one, also `localhost`, `127.0.0.1` and `::1`) and the
configured names are served. The port is not compared: a proxy or an `ssh -L` tunnel
changes it, and a rebound page can only reach the port the dashboard listens on anyway.
Standard library only: the CLI checks its options with it before the extra is imported.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

WILDCARDS = frozenset({"", "0.0.0.0", "::"})
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def _name(host: str) -> str:
    """A host name as compared: lower case, without IPv6 brackets or a trailing dot."""
    return host.strip().lower().removeprefix("[").removesuffix("]").rstrip(".")


def _is_loopback(name: str) -> bool:
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def allowed(listen: str, configured: tuple[str, ...] = ()) -> frozenset[str] | None:
    """The host names served when listening on `listen` with `configured` names (None:
    any, for `*`, which only a dashboard with a password may use)."""
    names = {_name(h) for h in configured}
    if "*" in names:
        return None
    listen = _name(listen)
    if listen not in WILDCARDS:
        names.add(listen)
    if _is_loopback(listen):
        names |= LOOPBACK_NAMES
    return frozenset(names)


def split(header: str) -> tuple[str, str]:
    """(name, port) of a Host header or an origin's netloc; port '' when none."""
    header = header.strip()
    if header.startswith("["):
        name, _, rest = header[1:].partition("]")
        return _name(name), rest.removeprefix(":")
    name, _, port = header.partition(":")
    return _name(name), port


def host_ok(header: str, names: frozenset[str] | None) -> bool:
    name, port = split(header)
    if not name or (port and not port.isdigit()):
        return False
    return names is None or name in names


def origin_ok(origin: str | None, host: str) -> bool:
    """A POST's Origin must be the host it was sent to (scheme aside: behind a TLS proxy
    the browser's origin is https). None: not a browser (every browser sends Origin with a
    POST), which still needs its session's cookie and token; `null` (a sandboxed frame, a
    redirect across sites) is refused."""
    if origin is None:
        return True
    parts = urlsplit(origin.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return False
    default = "443" if parts.scheme == "https" else "80"
    o_name, o_port = split(parts.netloc)
    h_name, h_port = split(host)
    return bool(o_name) and o_name == h_name and (o_port or default) == (h_port or default)
