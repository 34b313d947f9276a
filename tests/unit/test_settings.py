import json

import pytest

from messaging.settings import SETTINGS, load, parse_bool

pytestmark = pytest.mark.unit


def test_precedence_env_then_state_then_default(tmp_path):
    (tmp_path / "state.json").write_text(json.dumps({"redis_url": "redis://127.0.0.1:1111/0",
                                                     "zk_hosts": "127.0.0.1:2222"}))
    settings = load({"CRAWLFLEET_RUN_DIR": str(tmp_path), "CRAWLFLEET_ZK_HOSTS": "zk.example:2181/x"})
    assert settings.redis_url == "redis://127.0.0.1:1111/0"
    assert settings.source("CRAWLFLEET_REDIS_URL") == "state"
    assert settings.zk_hosts == "zk.example:2181/x"
    assert settings.source("CRAWLFLEET_ZK_HOSTS") == "env"
    assert settings.topic_incoming == "crawlfleet.incoming"
    assert settings.source("CRAWLFLEET_TOPIC_INCOMING") == "default"


def test_values_are_parsed_and_bad_values_named(tmp_path):
    env = {"CRAWLFLEET_RUN_DIR": str(tmp_path), "CRAWLFLEET_ZK_TIMEOUT": "4.5", "CRAWLFLEET_REDIS_CLUSTER": "yes"}
    settings = load(env)
    assert settings.zk_timeout == 4.5 and settings.redis_cluster is True
    with pytest.raises(ValueError, match="CRAWLFLEET_KAFKA_SESSION_TIMEOUT_MS"):
        load({**env, "CRAWLFLEET_KAFKA_SESSION_TIMEOUT_MS": "soon"})
    with pytest.raises(ValueError):
        parse_bool("maybe")


def test_as_env_round_trips(tmp_path):
    settings = load({"CRAWLFLEET_RUN_DIR": str(tmp_path), "CRAWLFLEET_REDIS_CLUSTER": "1"})
    again = load(settings.as_env())
    assert dict(again) == dict(settings)


def test_every_setting_is_documented():
    for name, setting in SETTINGS.items():
        assert name.startswith("CRAWLFLEET_") and setting.doc.strip(), name


def test_unknown_attribute_is_an_error(tmp_path):
    with pytest.raises(AttributeError):
        _ = load({"CRAWLFLEET_RUN_DIR": str(tmp_path)}).no_such_setting
