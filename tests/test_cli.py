from kbroker.cli import main


def test_unreachable_zookeeper_is_one_line_and_status_2(capsys, tmp_path):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["serve", "--override", f"zookeeper.connect=127.0.0.1:{port}", "--override",
                 "zookeeper.connection.timeout.ms=1500", "--override", f"log.dirs={tmp_path}",
                 "--override", "listeners=PLAINTEXT://127.0.0.1:0"]) == 2
    err = capsys.readouterr().err
    assert f"cannot reach ZooKeeper at 127.0.0.1:{port}" in err
    assert "Traceback" not in err


def test_bad_override_is_reported(capsys):
    assert main(["serve", "--override", "num.partitions"]) == 2
    assert main(["serve", "--override", "num.partitions=many"]) == 2
    assert "num.partitions" in capsys.readouterr().err


def test_console_refuses_bad_arguments_before_serving(capsys):
    assert main(["console", "--bootstrap-server", "no-port-here"]) == 2
    assert "invalid broker address" in capsys.readouterr().err
    assert main(["console", "--refresh", "0.1"]) == 2
