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


def test_the_typed_attributes_are_generated_from_the_registry():
    from collections.abc import Mapping

    from deploy.readme import FIELDS, settings_fields
    from messaging.settings_fields import SettingsFields

    assert FIELDS.read_text() == settings_fields(), "messaging/settings_fields.py is stale: run `make readme`"
    annotations = SettingsFields.__annotations__
    assert list(annotations) == [setting.attribute for setting in SETTINGS.values()]
    assert not set(annotations) & set(dir(Mapping)), "a setting would hide a method of the mapping"


def test_every_default_has_its_declared_type(tmp_path):
    settings = load({"CRAWLFLEET_RUN_DIR": str(tmp_path)})
    for name, setting in SETTINGS.items():
        value = getattr(settings, setting.attribute)
        assert value is settings[name]
        assert isinstance(value, setting.type) or (setting.type is float and type(value) is int), name


def test_settings_are_read_only(tmp_path):
    settings = load({"CRAWLFLEET_RUN_DIR": str(tmp_path)})
    with pytest.raises(AttributeError, match="read-only"):
        settings.redis_url = "redis://elsewhere/0"
    with pytest.raises(AttributeError):
        settings.no_such_setting  # noqa: B018  (a misspelt name fails, never None)


def test_a_process_reads_its_settings_once_until_they_change(tmp_path, monkeypatch):
    for name in [name for name in __import__("os").environ if name.startswith("CRAWLFLEET_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("CRAWLFLEET_RUN_DIR", str(tmp_path))
    first = load()
    assert load() is first  # no second read of the state file
    (tmp_path / "state.json").write_text(json.dumps({"redis_url": "redis://127.0.0.1:1111/0"}))
    changed = load()
    assert changed is not first and changed.redis_url == "redis://127.0.0.1:1111/0"
    monkeypatch.setenv("CRAWLFLEET_ZK_TIMEOUT", "2.5")
    assert load().zk_timeout == 2.5 and load() is load()


def test_a_crawler_reads_them_once(tmp_path, monkeypatch):
    from scrapy.settings import Settings as ScrapySettings

    from spiders.fleet_settings import crawlfleet_settings

    monkeypatch.setenv("CRAWLFLEET_RUN_DIR", str(tmp_path))
    scrapy_settings = ScrapySettings({"CRAWLFLEET_PREFETCH": "7"})
    assert crawlfleet_settings(scrapy_settings).prefetch == 7  # not frozen yet: resolved each time
    scrapy_settings.set("CRAWLFLEET_PREFETCH", "9")
    assert crawlfleet_settings(scrapy_settings).prefetch == 9
    scrapy_settings.freeze()
    first = crawlfleet_settings(scrapy_settings)
    assert first.prefetch == 9 and crawlfleet_settings(scrapy_settings) is first


def test_every_crawlfleet_name_in_the_code_and_docs_is_a_declared_setting():
    """docs/architecture.md: every CRAWLFLEET_* setting is declared in messaging/settings.py."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    name = re.compile(r"\bCRAWLFLEET_[A-Z0-9_]*[A-Z0-9]\b")
    places = [root / "README.md", root / "docker-compose.yml", *root.glob("docs/*.md")]
    for floor in ("messaging", "frontier", "master", "spiders", "manager", "deploy", "bench"):
        places += [path for path in (root / floor).rglob("*") if path.suffix in {".py", ".md", ".yml", ".yaml",
                                                                                   ".sh", ".html", ".j2", ".json"}]
    undeclared = {(match, str(path.relative_to(root))) for path in places if path.is_file()
                  for match in name.findall(path.read_text(errors="replace")) if match not in SETTINGS}
    assert not undeclared, sorted(undeclared)
