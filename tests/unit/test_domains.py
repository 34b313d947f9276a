import pytest

from messaging import keys
from messaging.domains import PARTITIONS, InvalidDomain, domain_of, domain_of_host, partition_key, robots_tag
from messaging.settings import PARTITION_MODES

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("url", "domain"),
    [
        ("http://www.bbc.co.uk/news", "bbc.co.uk"),
        ("https://a.b.example.com:8443/x?y", "example.com"),
        ("http://news.fleet.test:8080/page/1", "news.fleet.test"),  # unknown suffix: the host
        ("http://NEWS.Fleet.TEST./", "news.fleet.test"),
        ("http://127.0.0.11:8080/", "127.0.0.11"),
        ("http://[::1]:8080/", "::1"),
        ("http://localhost/", "localhost"),
        ("http://www.sina.com.cn/", "sina.com.cn"),
    ],
)
def test_domain_of(url, domain):
    assert domain_of(url) == domain


@pytest.mark.parametrize("url", ["", "/relative/path", "http://", "mailto:someone"])
def test_no_host_is_an_error(url):
    with pytest.raises(InvalidDomain):
        domain_of(url)


def test_domain_keys_are_hash_tagged_and_never_empty():
    domain = domain_of("http://news.fleet.test:8080/")
    assert keys.queue("job1", domain) == "job1:{news.fleet.test}:queue"
    assert keys.throttle_ip("127.0.0.2", domain_of_host("127.0.0.11")) == "127.0.0.2:{127.0.0.11}:throttle"
    parsed = keys.parse_domain_key(keys.inflight("job-7", "example.com"))
    assert (parsed.owner, parsed.domain, parsed.kind) == ("job-7", "example.com", "inflight")
    with pytest.raises(ValueError):
        keys.queue("job1", "")
    with pytest.raises(ValueError):
        keys.block("a{b}")


@pytest.mark.parametrize(
    ("url", "mode", "address", "key"),
    [
        ("http://a.blogspot.com/x", "domain", None, "blogspot.com"),  # the registered domain: one queue for all
        ("http://a.blogspot.com/x", "host", None, "a.blogspot.com"),  # one per host
        ("http://B.blogspot.com:8080/x", "host", None, "b.blogspot.com"),  # no port, lower case
        ("http://a.blogspot.com/x", "ip", "142.250.1.1", "142.250.1.1"),  # one per server address
        ("http://a.blogspot.com/x", "ip", None, "a.blogspot.com"),  # a host that does not resolve: its name
        ("http://10.0.0.7:8080/", "host", None, "10.0.0.7"),  # an address is its own key in every mode
        ("http://[::1]/", "ip", "127.0.0.1", "::1"),
    ],
)
def test_the_partition_key_follows_the_crawls_partition(url, mode, address, key):
    assert partition_key(url, mode, address) == key
    keys.queue("job", key)  # every key passes the key builder's host rule


def test_an_unknown_partition_or_a_bad_host_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="unknown partition 'server'"):
        partition_key("http://a.example.com/", "server")
    with pytest.raises(InvalidDomain):
        partition_key("http://a%20b.example.com/", "host")
    assert PARTITIONS == PARTITION_MODES  # the settings registry's copy (CRAWLFLEET_PARTITION) is the same


def test_a_hosts_robots_txt_is_kept_under_its_registered_domain_whatever_the_queue():
    assert [robots_tag(host) for host in ("a.blogspot.com", "news.fleet.test:8080", "10.0.0.7:81", "a b")] == \
        ["blogspot.com", "news.fleet.test", "10.0.0.7", ""]


def test_a_host_key_takes_its_own_site_config_else_its_registered_domains():
    """Issue 37, item 2: a host partition applies a host's own config (written with ``"host": true``) before its
    registered domain's; a domain and an address have their own only; a blacklist anywhere holds."""
    from frontier.config_watch import StaticSiteConfig
    from messaging.siteconfig import Rate, SiteConfig, site_names

    assert site_names("a.blogspot.com") == ("a.blogspot.com", "blogspot.com")
    assert site_names("blogspot.com") == ("blogspot.com",) and site_names("10.0.0.7") == ("10.0.0.7",)
    rates = StaticSiteConfig(Rate(10, 60), {"blogspot.com": SiteConfig(rate=30, window=60),
                                            "api.blogspot.com": SiteConfig(rate=120, window=60),
                                            "old.blogspot.com": SiteConfig(blacklisted=True)})
    assert rates.rate_for("a.blogspot.com") == Rate(30, 60)  # the domain's
    assert rates.rate_for("api.blogspot.com") == Rate(120, 60)  # its own
    assert rates.rate_for("old.blogspot.com") == Rate(30, 60) and rates.is_blacklisted("old.blogspot.com")
    assert not rates.is_blacklisted("blogspot.com") and rates.rate_for("10.0.0.7") == Rate(10, 60)
