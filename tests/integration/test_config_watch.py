"""The site-config watch on a real ZooKeeper: first read, live changes within 1 s, survival of a lost session."""

from __future__ import annotations

from typing import Any

import pytest
from kazoo.client import KazooClient

from deploy.procs import wait_for
from frontier.config_watch import SiteConfigWatch
from messaging.siteconfig import Rate, SiteConfig, SitePaths, update_site, write_defaults

pytestmark = pytest.mark.integration

APPLY_BOUND = 1.0  # seconds from the ZooKeeper write to the worker's view (the bound)


@pytest.fixture
def zk_paths(cf: Any) -> tuple[Any, SitePaths]:
    return cf.zk(), SitePaths(cf.settings.zk_root)


def test_reads_defaults_and_sites_at_start(zk_paths: tuple[Any, SitePaths]) -> None:
    zk, paths = zk_paths
    write_defaults(zk, paths, Rate(7, 30))
    update_site(zk, paths, "a.test", lambda _: SiteConfig(rate=2, window=5))
    update_site(zk, paths, "b.test", lambda _: SiteConfig(blacklisted=True))
    watch = SiteConfigWatch(zk, paths).start()
    assert watch.defaults == Rate(7, 30)
    assert watch.rate_for("a.test") == Rate(2, 5)
    assert watch.rate_for("c.test") == Rate(7, 30)
    assert watch.is_blacklisted("b.test") and not watch.is_blacklisted("a.test")
    assert watch.blacklisted_domains() == {"b.test"}


def test_changes_apply_within_one_second_without_restart(cf: Any, zk_paths: tuple[Any, SitePaths]) -> None:
    zk, paths = zk_paths
    watch = SiteConfigWatch(zk, paths).start()
    changed: list[str | None] = []
    watch.add_listener(changed.append)
    writer = cf.zk()  # another client: the write comes from elsewhere, as from the Redis monitor

    update_site(writer, paths, "new.test", lambda _: SiteConfig(rate=3, window=2))  # a new site (child)
    wait_for(lambda: watch.rate_for("new.test") == Rate(3, 2), APPLY_BOUND, "a new site")
    update_site(writer, paths, "new.test", lambda c: SiteConfig(rate=9, window=c.window))  # changed data
    wait_for(lambda: watch.rate_for("new.test") == Rate(9, 2), APPLY_BOUND, "a changed rate")
    update_site(writer, paths, "new.test", lambda c: SiteConfig(c.rate, c.window, blacklisted=True))
    wait_for(lambda: watch.is_blacklisted("new.test"), APPLY_BOUND, "a blacklisting")
    write_defaults(writer, paths, Rate(50, 10))
    wait_for(lambda: watch.rate_for("other.test") == Rate(50, 10), APPLY_BOUND, "new defaults")
    writer.delete(paths.site("new.test"))  # a removed site falls back to the defaults
    wait_for(lambda: watch.rate_for("new.test") == Rate(50, 10), APPLY_BOUND, "a removed site")
    update_site(writer, paths, "new.test", lambda _: SiteConfig(rate=1, window=1))  # and may come back
    wait_for(lambda: watch.rate_for("new.test") == Rate(1, 1), APPLY_BOUND, "a re-created site")
    # the watches were re-armed after every event: each change arrived, the listener saw them all
    assert changed.count("new.test") == 5 and None in changed  # create, 2 changes, delete, re-create


def test_watches_survive_an_expired_session(cf: Any, zk_paths: tuple[Any, SitePaths]) -> None:
    zk, paths = zk_paths
    update_site(zk, paths, "s.test", lambda _: SiteConfig(rate=1, window=1))
    watch = SiteConfigWatch(zk, paths).start()
    writer = cf.zk()
    old_session = zk.client_id[0]
    # Expire the watch's session from outside, as a ZooKeeper failover or a long pause would: a second client
    # attaches to the same session and closes it (kazoo's own test harness does the same).
    thief = KazooClient(hosts=cf.settings.zk_hosts, client_id=zk.client_id, timeout=cf.settings.zk_timeout)
    thief.start(timeout=10)
    thief.stop()
    thief.close()
    # a change written while the watch's session is gone: only a re-read after the new session can see it
    update_site(writer, paths, "s.test", lambda _: SiteConfig(rate=2, window=1))
    update_site(writer, paths, "t.test", lambda _: SiteConfig(rate=5, window=1))
    wait_for(lambda: watch.session_losses == 1 and zk.connected and zk.client_id[0] != old_session,
             3 * cf.settings.zk_timeout, "the watch's client to get a new session")
    wait_for(lambda: watch.rate_for("s.test") == Rate(2, 1) and watch.rate_for("t.test") == Rate(5, 1),
             3 * cf.settings.zk_timeout, "the changes made while the session was gone")
    # and the watches are armed again on the new session
    update_site(writer, paths, "s.test", lambda _: SiteConfig(rate=3, window=1))
    wait_for(lambda: watch.rate_for("s.test") == Rate(3, 1), APPLY_BOUND, "a change after the new session")
    update_site(writer, paths, "u.test", lambda _: SiteConfig(rate=4, window=1))
    wait_for(lambda: watch.rate_for("u.test") == Rate(4, 1), APPLY_BOUND, "a new site after the new session")
