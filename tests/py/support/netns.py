"""A network namespace whose processes reach the database over a veth pair that a test can
blackhole: packets sent to the database's side go to a MAC address nobody has, so they
vanish without a reset, as when a network partition or a dead switch drops them (the
machine has neither netem nor iptables; `ip neigh` works).

The database listens on 127.0.0.1 only: a TCP forwarder (proxy.Proxy) on the root side of
the pair passes connections on. Names carry `pgq` and the test process's id, and the
subnet is the project's own (10.115.54.0/24, a /30 per process), so that tests of other
branches running at the same time on this machine never collide with it.
"""

from __future__ import annotations

import os
import subprocess
from types import TracebackType

from support.proxy import Proxy

_UNUSED_MAC = "02:00:5e:10:00:01"  # locally administered: no interface here has it


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


class Namespace:
    """`with Namespace(db_port) as ns:` run a process with `ns.wrap` prefixed to its command
    and have it connect to `ns.host`:`ns.port`; `ns.blackhole()` and `ns.heal()`."""

    def __init__(self, db_port: int) -> None:
        tag = os.getpid() % 100000
        self.name = f"pgq-netns-{tag}"
        self.outer = f"pgq{tag}o"  # interface names: at most 15 characters
        self.inner = f"pgq{tag}i"
        base = 4 * (tag % 64)
        self.host = f"10.115.54.{base + 1}"  # the root side: the forwarder listens here
        self.guest = f"10.115.54.{base + 2}"
        self.wrap = ("ip", "netns", "exec", self.name)
        self._db_port = db_port
        self._proxy: Proxy | None = None

    def __enter__(self) -> Namespace:
        self._teardown()  # a previous run of this process id that did not clean up
        try:
            _ip("netns", "add", self.name)
            _ip("link", "add", self.outer, "type", "veth", "peer", "name", self.inner)
            _ip("link", "set", self.inner, "netns", self.name)
            _ip("addr", "add", f"{self.host}/30", "dev", self.outer)
            _ip("link", "set", self.outer, "up")
            _ip("-n", self.name, "addr", "add", f"{self.guest}/30", "dev", self.inner)
            _ip("-n", self.name, "link", "set", self.inner, "up")
            _ip("-n", self.name, "link", "set", "lo", "up")
            self._proxy = Proxy(self._db_port, listen_host=self.host)
        except BaseException:
            self._teardown()
            raise
        return self

    @property
    def port(self) -> int:
        return self.proxy.port

    @property
    def proxy(self) -> Proxy:
        assert self._proxy is not None
        return self._proxy

    def blackhole(self) -> None:
        """From now on the namespace's packets to the database side are dropped silently."""
        neigh = ("neigh", "replace", self.host, "lladdr", _UNUSED_MAC, "nud", "permanent", "dev", self.inner)
        _ip("-n", self.name, *neigh)

    def heal(self) -> None:
        """The address resolves again (ARP), and packets flow."""
        _ip("-n", self.name, "neigh", "del", self.host, "dev", self.inner)

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._teardown()

    def _teardown(self) -> None:
        if self._proxy is not None:
            self._proxy.close()
            self._proxy = None
        # Deleting the namespace deletes its end of the pair, and with it the other end.
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, timeout=10, check=False)
        subprocess.run(["ip", "link", "del", self.outer], capture_output=True, timeout=10, check=False)
