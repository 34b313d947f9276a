"""Defaults come only from the settings registry (messaging.settings): the feed's and the manager's config agree with
it, and the crawler's module name is spelled once (messaging.modules)."""

from __future__ import annotations

import dataclasses

import pytest

from manager.config import ManagerConfig
from messaging import modules
from messaging.settings import SETTINGS, load
from spiders.worker.feed import FeedConfig

pytestmark = pytest.mark.unit


def test_the_feed_config_defaults_are_the_registry_defaults():
    for field in dataclasses.fields(FeedConfig):
        assert field.default == SETTINGS[f"CRAWLFLEET_{field.name.upper()}"].default, field.name


def test_the_manager_heartbeat_is_a_setting(tmp_path):
    default = SETTINGS["CRAWLFLEET_MANAGER_HEARTBEAT_INTERVAL"].default
    assert ManagerConfig.__dataclass_fields__["heartbeat_interval"].default == default
    env = {"CRAWLFLEET_RUN_DIR": str(tmp_path), "CRAWLFLEET_MANAGER_HEARTBEAT_INTERVAL": "0.5"}
    config = ManagerConfig.from_settings(load(env))
    assert config.heartbeat_interval == 0.5 and config.registry_ttl == 2.0


def test_the_crawler_module_name_is_the_one_of_messaging_modules():
    from spiders import metrics as worker_metrics
    from spiders.middlewares import status

    assert status.STATS_MODULE == worker_metrics.MODULE == modules.CRAWLER
