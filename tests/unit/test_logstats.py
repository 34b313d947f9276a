"""Scrapy's stats dump as LogParser shows it (manager.logstats): dates become their text, a broken dump nothing."""

import pytest

from manager.logstats import parse_stats_dump

pytestmark = pytest.mark.unit


def test_dates_become_their_text_whatever_fields_and_zone_they_have():
    dump = ("{'downloader/request_count': 3,\n"
            " 'finish_time': datetime.datetime(2024, 5, 1, 10, 1, 4, 123456, tzinfo=datetime.timezone.utc),\n"
            " 'start_time': datetime.datetime(2024, 5, 1,"
            " tzinfo=datetime.timezone(datetime.timedelta(seconds=3600))),\n"
            " 'odd': datetime.datetime(2024, 5)}")
    assert parse_stats_dump(dump) == {"downloader/request_count": 3, "finish_time": "2024-05-01 10:01:04",
                                      "start_time": "2024-05-01 00:00:00", "odd": None}


@pytest.mark.parametrize("dump", ["", "{'a': ", "[1, 2]", "{'a': datetime.datetime(2024, 13, 1)}"])
def test_a_dump_that_is_no_dict_of_literals_is_nothing(dump):
    assert parse_stats_dump(dump) == {}
