from kbroker.views.batch_filter import ALL, NONE
from kbroker.views.match_cache import ENTRY_OVERHEAD, MatchCache


def test_bounded_by_bytes_least_recently_used_first_out():
    cache = MatchCache(3 * ENTRY_OVERHEAD + 100)
    cache.put("a", ALL)
    cache.put("b", NONE)
    cache.put("c", b"x" * 100)
    assert cache.get("a") is ALL  # "b" is now the least recently used
    cache.put("d", NONE)
    assert cache.get("b") is None and cache.get("a") is ALL and cache.get("d") is NONE
    assert cache.statistics()["bytes"] <= cache.max_bytes


def test_an_entry_larger_than_the_whole_cache_is_not_kept():
    cache = MatchCache(ENTRY_OVERHEAD + 10)
    cache.put("big", b"x" * 11)
    assert cache.get("big") is None and cache.statistics()["entries"] == 0
