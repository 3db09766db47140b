"""Start-up refusals of secured listeners, with real `python -m kbroker serve` processes: a listener
whose security cannot be served is exit status 2, ONE line on stderr naming what is missing (no
traceback, no password echoed, no prompt for one), and nothing ever listens on any of its ports
(not even the PLAINTEXT listener configured beside it).

Certificates and keystores come from securitykit.make_pki, made for the module.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import securitykit as sk
from cryptography.hazmat.primitives.serialization import load_pem_private_key

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parent.parent
PLAIN_JAAS = f'{sk.PLAIN_LOGIN} required user_alice="alice-pw";'


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return sk.make_pki(tmp_path_factory.mktemp("startup-pki"))


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((sk.HOST, port)) == 0


def _serve_watching(ports: list[int], overrides: list[str], data: Path, timeout: float = 30):
    """Run the broker; while it runs, keep trying to connect to `ports`. (result, ports seen listening)"""
    argv = [sys.executable, "-m", "kbroker", "serve", "--override", f"log.dirs={data}"]
    for item in overrides:
        argv += ["--override", item]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            text=True, cwd=str(REPO), start_new_session=True)
    seen: set[int] = set()
    done = threading.Event()

    def watch():
        while not done.is_set():
            seen.update(p for p in ports if _listening(p))
            time.sleep(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()  # by its PID: the process we started
        out, err = proc.communicate()
        done.set()
        pytest.fail(f"the broker kept running for {timeout}s instead of refusing to start; stderr:\n{err[-2000:]}")
    finally:
        done.set()
        watcher.join(5)
    seen.update(p for p in ports if _listening(p))
    return subprocess.CompletedProcess(argv, proc.returncode, out, err), seen


def _port() -> int:
    with socket.socket() as s:
        s.bind((sk.HOST, 0))
        return s.getsockname()[1]


def _cases(pki: sk.Pki, p: int, q: int):
    """name -> (listener ports, overrides, words the line must hold (any of a tuple), secrets it must not)"""
    unencrypted_key = pki.broker_key.read_text()
    encrypted_inline_key = sk._key_pem(load_pem_private_key(unencrypted_key.encode(), None), pki.key_password).decode()
    ssl = f"SSL://{sk.HOST}:{p}"
    return {
        "sasl_ssl-no-keystore-no-mechanisms": (
            [p], [f"listeners=SASL_SSL://{sk.HOST}:{p}"],
            ["SASL_SSL", ("ssl.keystore", "keystore", "sasl.enabled.mechanisms", "GSSAPI")], []),
        "ssl-no-keystore": ([p], [f"listeners={ssl}"], ["SSL", ("ssl.keystore.location", "keystore")], []),
        "plaintext-beside-an-ssl-listener-without-keystore": (
            [p, q], [f"listeners=PLAINTEXT://{sk.HOST}:{q},{ssl}"], ["SSL", "keystore"], []),
        "gssapi": ([p], [f"listeners=SASL_PLAINTEXT://{sk.HOST}:{p}", "sasl.enabled.mechanisms=GSSAPI"],
                   ["GSSAPI"], []),
        "gssapi-among-others": (
            [p], [f"listeners=SASL_PLAINTEXT://{sk.HOST}:{p}", "sasl.enabled.mechanisms=PLAIN,GSSAPI",
                  f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}"], ["GSSAPI"], ["alice-pw"]),
        "unknown-mechanism": ([p], [f"listeners=SASL_PLAINTEXT://{sk.HOST}:{p}", "sasl.enabled.mechanisms=SCRAM-SHA-1"],
                              ["SCRAM-SHA-1"], []),
        "plain-without-users": ([p], [f"listeners=SASL_PLAINTEXT://{sk.HOST}:{p}", "sasl.enabled.mechanisms=PLAIN"],
                                ["sasl.jaas.config"], []),
        "jks-keystore": ([p], [f"listeners={ssl}", "ssl.keystore.type=JKS", f"ssl.keystore.location={pki.jks}",
                               f"ssl.keystore.password={pki.keystore_password}"], ["JKS"], [pki.keystore_password]),
        "jks-file-declared-pkcs12": ([p], [f"listeners={ssl}", "ssl.keystore.type=PKCS12",
                                           f"ssl.keystore.location={pki.jks}",
                                           f"ssl.keystore.password={pki.keystore_password}"],
                                     ["JKS"], [pki.keystore_password]),
        "pkcs12-wrong-password": ([p], [f"listeners={ssl}", "ssl.keystore.type=PKCS12",
                                        f"ssl.keystore.location={pki.broker_p12}",
                                        "ssl.keystore.password=not-the-password-4711"],
                                  [str(pki.broker_p12), "password"], ["not-the-password-4711"]),
        "keystore-file-missing": ([p], [f"listeners={ssl}", "ssl.keystore.type=PKCS12",
                                        f"ssl.keystore.location={pki.dir / 'nowhere.p12'}",
                                        f"ssl.keystore.password={pki.keystore_password}"],
                                  [str(pki.dir / "nowhere.p12")], [pki.keystore_password]),
        # Kafka: "SSL PEM key store is specified, but key password is not specified."
        "pem-keystore-encrypted-key-without-key-password": (
            [p], [f"listeners={ssl}", "ssl.keystore.type=PEM", f"ssl.keystore.location={pki.broker_pem_keystore}"],
            [("ssl.key.password", "key password")], []),
        "inline-pem-encrypted-key-without-key-password": (
            [p], [f"listeners={ssl}", "ssl.keystore.type=PEM",
                  f"ssl.keystore.certificate.chain={pki.broker_chain_pem()}", f"ssl.keystore.key={encrypted_inline_key}"],
            [("ssl.key.password", "key password")], []),
        "pem-keystore-wrong-key-password": (
            [p], [f"listeners={ssl}", "ssl.keystore.type=PEM", f"ssl.keystore.location={pki.broker_pem_keystore}",
                  "ssl.key.password=not-the-key-password-0815"],
            [("ssl.key.password", "key password")], ["not-the-key-password-0815"]),
    }


CASE_NAMES = [  # the keys of _cases (checked by the test), for parametrize
    "sasl_ssl-no-keystore-no-mechanisms", "ssl-no-keystore", "plaintext-beside-an-ssl-listener-without-keystore",
    "gssapi", "gssapi-among-others", "unknown-mechanism", "plain-without-users", "jks-keystore",
    "jks-file-declared-pkcs12", "pkcs12-wrong-password", "keystore-file-missing",
    "pem-keystore-encrypted-key-without-key-password", "inline-pem-encrypted-key-without-key-password",
    "pem-keystore-wrong-key-password"]


@pytest.mark.parametrize("name", CASE_NAMES)
def test_unservable_listener_security_is_refused_at_start_up(pki, tmp_path, name):
    p, q = _port(), _port()
    cases = _cases(pki, p, q)
    assert sorted(cases) == sorted(CASE_NAMES)
    ports, overrides, words, secrets = cases[name]
    result, seen = _serve_watching(ports, overrides, tmp_path / "data")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, f"exit status {result.returncode}; stderr:\n{result.stderr[-3000:]}"
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert len(lines) == 1, f"{len(lines)} lines on stderr, one expected:\n{result.stderr[-3000:]}"
    line = lines[0]
    for word in words:
        options = word if isinstance(word, tuple) else (word,)
        assert any(o in line for o in options), f"{line!r} names none of {options}"
    for s in secrets:
        assert s not in line, f"the refusal repeats a password: {line!r}"
    assert "pass phrase" not in result.stdout + result.stderr, "OpenSSL prompted for a pass phrase"
    assert not seen, f"ports {sorted(seen)} accepted connections although the broker refused to start"
