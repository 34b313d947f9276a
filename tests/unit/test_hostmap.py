import os
from pathlib import Path

import pytest

from messaging.hostmap import HostMap, load_hostmap, parse_hosts, resolve_host
from messaging.settings import load

pytestmark = pytest.mark.unit

HOSTS = """\
# the demo web
127.0.0.11   news.fleet.test  www.news.fleet.test   # two names, one address
127.0.0.12\tchina.fleet.test
::1          six.fleet.test
not-an-ip    broken.fleet.test
127.0.0.99   news.fleet.test
"""


def replace(path: Path, text: str) -> None:
    """Write the file as the demo web does: a new file renamed over the old one."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def test_parse_names_comments_and_bad_lines():
    entries = parse_hosts(HOSTS)
    assert entries == {
        "news.fleet.test": "127.0.0.11",  # the first line that names a host wins, as in /etc/hosts
        "www.news.fleet.test": "127.0.0.11",
        "china.fleet.test": "127.0.0.12",
        "six.fleet.test": "::1",
    }


def test_lookup_ignores_case_and_trailing_dot():
    hostmap = HostMap(parse_hosts(HOSTS))
    assert hostmap.lookup("NEWS.Fleet.Test") == "127.0.0.11"
    assert hostmap.lookup("china.fleet.test.") == "127.0.0.12"
    assert hostmap.lookup("example.com") is None
    assert hostmap["www.news.fleet.test"] == "127.0.0.11"
    with pytest.raises(KeyError):
        hostmap["broken.fleet.test"]
    assert len(hostmap) == 4


def test_file_is_reread_when_it_changes(tmp_path):
    path = tmp_path / "hosts"
    hostmap = HostMap.from_file(path, check_interval=0)
    assert hostmap.lookup("news.fleet.test") is None  # no file yet: an empty map, not an error
    replace(path, "127.0.0.11 news.fleet.test\n")
    assert hostmap.lookup("news.fleet.test") == "127.0.0.11"
    replace(path, "127.0.0.21 news.fleet.test\n127.0.0.22 blog.fleet.test\n")
    assert hostmap.lookup("news.fleet.test") == "127.0.0.21"
    assert sorted(hostmap) == ["blog.fleet.test", "news.fleet.test"]
    path.unlink()
    assert hostmap.lookup("news.fleet.test") is None


def test_file_is_checked_at_most_once_per_interval(tmp_path):
    path = tmp_path / "hosts"
    replace(path, "127.0.0.11 news.fleet.test\n")
    hostmap = HostMap.from_file(path, check_interval=3600)
    assert hostmap.lookup("news.fleet.test") == "127.0.0.11"
    replace(path, "127.0.0.21 news.fleet.test\n")
    assert hostmap.lookup("news.fleet.test") == "127.0.0.11"  # not stat'ed again within the interval


def test_load_hostmap_from_settings(tmp_path):
    path = tmp_path / "hosts"
    path.write_text("127.0.0.13 blog.fleet.test\n")
    settings = load({"CRAWLFLEET_RUN_DIR": str(tmp_path), "CRAWLFLEET_HOSTS_FILE": str(path)})
    assert load_hostmap(settings).lookup("blog.fleet.test") == "127.0.0.13"
    (tmp_path / "state.json").write_text(f'{{"hosts_file": "{path}"}}')  # a local run's default
    assert load_hostmap(load({"CRAWLFLEET_RUN_DIR": str(tmp_path)})).lookup("blog.fleet.test") == "127.0.0.13"
    empty = load_hostmap(load({"CRAWLFLEET_RUN_DIR": str(tmp_path / "none"), "CRAWLFLEET_HOSTS_FILE": ""}))
    assert len(empty) == 0 and empty.path is None


def test_resolve_host_prefers_the_map_then_the_system():
    hostmap = HostMap({"news.fleet.test": "127.0.0.11"})
    assert resolve_host("news.fleet.test", hostmap) == "127.0.0.11"
    assert resolve_host("127.0.0.5", hostmap) == "127.0.0.5"  # the system resolver returns IP literals as they are


def test_the_address_cache_never_makes_its_caller_wait_and_remembers():
    """The partition by IP (master.placement): the first ask starts a resolution and answers None (the task waits a
    round); then the address, for ``ttl``; a name that does not resolve is keyed by itself."""
    from deploy.procs import wait_for
    from messaging.hostmap import AddressCache

    asked = []

    def resolve(name):
        asked.append(name)
        if name == "gone.example":
            raise OSError("Name or service not known")
        return "203.0.113.9"

    now = [0.0]
    cache = AddressCache(HostMap(), ttl=60, failed_ttl=5, resolve=resolve, clock=lambda: now[0])
    try:
        assert cache.address("10.1.2.3") == "10.1.2.3" and cache.address("[::1]") == "::1"  # literals: at once
        assert cache.address("shop.example") is None
        assert wait_for(lambda: cache.address("shop.example"), 5, "the resolution") == "203.0.113.9"
        assert cache.address("gone.example") is None
        assert wait_for(lambda: cache.address("gone.example"), 5, "the failure") == "gone.example"
        now[0] = 61.0  # stale: still answered (no wait), and resolved again behind the caller's back
        assert cache.address("shop.example") == "203.0.113.9"
        wait_for(lambda: asked.count("shop.example") == 2, 5, "the second resolution")
    finally:
        cache.close()
