"""The running Twisted reactor, typed as the fleet uses it.

Twisted annotates ``twisted.internet.reactor`` as a make-believe ``_IReactorCommon`` (core, time, file descriptors,
TCP, processes) and leaves out the calls from other threads (``callFromThread``) and the thread pool, which every
reactor Scrapy installs has (``ReactorBase`` provides ``IReactorThreads`` wherever there are threads). Code that
calls the reactor takes it from :func:`running_reactor`, typed as :class:`IFleetReactor`; a web site is served with
:func:`serve_http`.

The import stays inside the function: importing ``twisted.internet.reactor`` installs the default reactor, and the
process (Scrapy's ``TWISTED_REACTOR``, the manager, a test) must choose it first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from twisted.internet.interfaces import (
    IListeningPort,
    IReactorCore,
    IReactorProcess,
    IReactorTCP,
    IReactorThreads,
    IReactorTime,
)
from twisted.internet.protocol import ServerFactory

if TYPE_CHECKING:
    from twisted.web.server import Site


class IFleetReactor(IReactorCore, IReactorTime, IReactorThreads, IReactorProcess, IReactorTCP):
    """What the fleet calls on the reactor: run and stop, timers, threads, processes and TCP listeners."""


def running_reactor() -> IFleetReactor:
    """The reactor of this process (installing Twisted's default one when none is yet)."""
    from twisted.internet import reactor

    # cast: Twisted's annotation of `reactor` omits IReactorThreads, which the installed reactor provides (above)
    return cast(IFleetReactor, reactor)


def serve_http(site: Site, port: int, interface: str) -> IListeningPort:
    """Serve ``site`` on TCP ``port`` of ``interface``, on the running reactor."""
    # cast: Twisted types listenTCP's factory as a ServerFactory of protocols bound to their factory, which its own
    # Site (a ServerFactory of a private HTTP channel wrapper) is not typed as; serving a Site so is its documented use
    return running_reactor().listenTCP(port, cast(ServerFactory, site), interface=interface)
