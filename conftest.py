"""Options for the whole suite: long soaks only run with --run-soak (their results are written in
the docs they belong to)."""

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-soak", action="store_true", default=False,
                     help="also run the long soak / fault runs (marked `soak`)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-soak"):
        return
    opt_in = pytest.mark.skip(reason="a long soak: run with --run-soak")
    for item in items:
        if "soak" in item.keywords:
            item.add_marker(opt_in)
