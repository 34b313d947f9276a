"""messaging.reactor types the running reactor as IFleetReactor: the reactors the fleet runs provide all of it
(Scrapy's default, asyncio's, in the workers; Twisted's default, epoll's, in the manager and the tools)."""

import pytest
from twisted.internet.asyncioreactor import AsyncioSelectorReactor
from twisted.internet.epollreactor import EPollReactor

from messaging.reactor import IFleetReactor

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("reactor_class", [AsyncioSelectorReactor, EPollReactor])
def test_the_reactors_provide_what_the_fleet_calls(reactor_class):
    missing = [interface.__name__ for interface in IFleetReactor.__bases__
               if not interface.implementedBy(reactor_class)]
    assert not missing
