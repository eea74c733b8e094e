"""``GET /volumes/summary`` added up over regions (pure logic)."""

import pytest

from isthmus.gateway.faults import Fault
from isthmus.gateway.lists import _non_negative
from isthmus.gateway.summaries import add_summaries


def test_counts_and_sizes_add_up_without_metadata_below_3_36():
    total = add_summaries([{"total_count": 2, "total_size": 3}, {"total_count": 1, "total_size": 10}])
    assert total == {"total_count": 3, "total_size": 13}


def test_metadata_is_the_union_of_distinct_values():
    total = add_summaries([{"total_count": 1, "total_size": 1, "metadata": {"k": ["a"], "x": ["1"]}},
                           {"total_count": 1, "total_size": 1, "metadata": {"k": ["b", "a"]}},
                           {"total_count": 0, "total_size": 0, "metadata": {}}])
    assert total["metadata"] == {"k": ["a", "b"], "x": ["1"]}


def test_no_region_is_an_empty_summary():
    assert add_summaries([]) == {"total_count": 0, "total_size": 0}


def test_limit_and_offset_values():
    assert _non_negative("offset", None) == 0 and _non_negative("offset", "2") == 2
    for bad in ("-1", "x", "1.5"):
        with pytest.raises(Fault) as err:
            _non_negative("offset", bad)
        assert err.value.status == 400 and "offset" in err.value.message
