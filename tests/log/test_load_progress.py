"""LoadProgress: start-up lines of partitions loaded / total with the time left, on a fake clock."""

from kbroker.log.load_progress import LoadProgress, format_duration


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_reports_at_most_once_per_interval_and_always_the_last():
    clock, lines = FakeClock(), []
    progress = LoadProgress(10, lines.append, interval_s=5, clock=clock)
    for i in range(10):
        clock.now += 1  # one partition a second
        progress.loaded("/data", recovered=i % 2 == 0)
    assert lines == [
        "loaded 5/10 partition logs (3 recovered) in /data, 5.0 s, about 5.0 s left",
        "loaded 10/10 partition logs (5 recovered) in /data, 10.0 s",
    ]


def test_the_estimate_follows_the_pace_so_far():
    clock, lines = FakeClock(), []
    progress = LoadProgress(1000, lines.append, interval_s=60, clock=clock)
    for _ in range(100):
        clock.now += 0.9
        progress.loaded("/d1", recovered=True)
    assert lines == ["loaded 67/1000 partition logs (67 recovered) in /d1, 1 min 0 s, about 14 min 0 s left"]


def test_durations_read_naturally():
    assert format_duration(3.25) == "3.2 s"
    assert format_duration(61) == "1 min 1 s"
    assert format_duration(7322) == "2 h 2 min"
