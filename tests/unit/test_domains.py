import pytest

from messaging import keys
from messaging.domains import InvalidDomain, domain_of, domain_of_host

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
