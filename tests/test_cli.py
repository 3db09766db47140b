from kbroker.cli import main


def test_cluster_mode_is_refused_clearly_until_it_exists(capsys):
    assert main(["serve", "--override", "zookeeper.connect=127.0.0.1:2181"]) == 2
    assert "zookeeper.connect" in capsys.readouterr().err


def test_bad_override_is_reported(capsys):
    assert main(["serve", "--override", "num.partitions"]) == 2
    assert main(["serve", "--override", "num.partitions=many"]) == 2
    assert "num.partitions" in capsys.readouterr().err
