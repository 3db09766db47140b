"""Secured development setups in one command — `kbroker serve --dev-security`, `kbroker dev-cluster
--security ssl|sasl_plaintext|sasl_ssl` — and kbroker.testing's `with_tls()` / `with_sasl()`:
throwaway certificates (devcerts.py), the broker keys of one listener with Kafka's names, a client
user, and the client settings to print (Kafka's client.properties, confluent-kafka's and
kafka-python's dicts).

What a setup sets on the brokers (listener name = protocol name, e.g. SASL_SSL):

    listeners=SASL_SSL://127.0.0.1:9092, inter.broker.listener.name=SASL_SSL
    ssl.keystore.* (PKCS12, the dev certificate), ssl.truststore.* (PEM, the dev CA)   [SSL, SASL_SSL]
    sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN, sasl.mechanism.inter.broker.protocol=PLAIN
    listener.name.sasl_ssl.plain.sasl.jaas.config: the brokers' own user `kbroker` (PLAIN, a
        random password; PLAIN because a broker must reach the others before any SCRAM user exists)
    listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=...ScramLoginModule required;

and the clients' user (`admin`, SCRAM-SHA-512, a random password) is a SCRAM credential: written
into the single node's `kbroker-scram-credentials.json` before it starts (`write_scram_credential`),
created over the SASL listener (AlterUserScramCredentials, authenticated as `kbroker` with PLAIN)
on a cluster. The passwords are kept in `<dir>/dev-security.json` (owner-only) so that a restarted
setup keeps working with the client files printed the first time.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbroker.devcerts import DevCertificates, dev_certificates
from kbroker.security.credentials import MECHANISMS as SCRAM_MECHANISMS
from kbroker.security.credentials import credentials_to_config, make_credential
from kbroker.security.jaas import LOGIN_MODULES, format_jaas

__all__ = [
    "ADMIN_USER",
    "BROKER_USER",
    "DEV_PROTOCOLS",
    "SCRAM_CREDENTIALS_FILE",
    "SecuritySetup",
    "create_scram_user",
    "dev_setup",
    "serve_overrides",
    "write_client_properties",
    "write_properties",
    "write_scram_credential",
]

DEV_PROTOCOLS = {"ssl": "SSL", "sasl_plaintext": "SASL_PLAINTEXT", "sasl_ssl": "SASL_SSL"}
BROKER_USER, ADMIN_USER = "kbroker", "admin"
STATE_FILE, CLIENT_PROPERTIES = "dev-security.json", "client.properties"
SCRAM_CREDENTIALS_FILE = "kbroker-scram-credentials.json"  # LocalMetadataStore's, in the first log dir
CLIENT_MECHANISMS = tuple(LOGIN_MODULES)  # PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER


@dataclass(frozen=True)
class SecuritySetup:
    """One listener's security and the one client user that goes with it."""

    protocol: str  # SSL, SASL_PLAINTEXT or SASL_SSL
    certs: DevCertificates | None = None  # SSL, SASL_SSL
    mechanism: str | None = None  # the client's SASL mechanism
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    broker_password: str | None = field(default=None, repr=False)  # the brokers' own PLAIN user

    def __post_init__(self) -> None:
        if self.protocol not in DEV_PROTOCOLS.values():
            raise ValueError(f"security protocol {self.protocol!r}: one of {', '.join(DEV_PROTOCOLS.values())}")
        if self.tls != (self.certs is not None):
            raise ValueError(f"{self.protocol} {'needs' if self.tls else 'takes no'} certificates")
        if self.sasl and (self.mechanism not in CLIENT_MECHANISMS or not self.username or not self.broker_password):
            raise ValueError(f"{self.protocol} needs a mechanism ({', '.join(CLIENT_MECHANISMS)}), a user and the "
                             f"brokers' own password")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def enabled_mechanisms(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([self.mechanism, "PLAIN"])) if self.sasl else ()

    # -- the brokers ------------------------------------------------------------------------------

    def broker_config(self, host: str = "127.0.0.1", port: int = 9092) -> dict[str, str]:
        """Kafka's broker keys for one listener named after the protocol on host:port."""
        config = {"listeners": f"{self.protocol}://{host}:{port}", "inter.broker.listener.name": self.protocol}
        if self.certs is not None:
            config.update(self.certs.broker_ssl_config())
        if self.sasl:
            prefix = f"listener.name.{self.protocol.lower()}"
            plain_users = {BROKER_USER: self.broker_password}
            if self.mechanism == "PLAIN":
                plain_users[self.username] = self.password or ""
            config.update({
                "sasl.enabled.mechanisms": ",".join(self.enabled_mechanisms),
                "sasl.mechanism.inter.broker.protocol": "PLAIN",
                f"{prefix}.plain.sasl.jaas.config": format_jaas(LOGIN_MODULES["PLAIN"], {
                    "username": BROKER_USER, "password": self.broker_password,
                    **{f"user_{u}": p for u, p in plain_users.items()}}),
            })
            if self.mechanism in SCRAM_MECHANISMS:
                config[f"{prefix}.{self.mechanism.lower()}.sasl.jaas.config"] = format_jaas(LOGIN_MODULES[self.mechanism], {})
            elif self.mechanism == "OAUTHBEARER":  # unsecured tokens: development only, as in Kafka
                config[f"{prefix}.oauthbearer.sasl.jaas.config"] = format_jaas(
                    LOGIN_MODULES["OAUTHBEARER"], {"unsecuredLoginStringClaim_sub": BROKER_USER})
        return config

    def scram_users(self) -> dict[str, dict[str, str]]:
        """The SCRAM credentials the client user needs (user -> {mechanism: Kafka's text form})."""
        if self.mechanism not in SCRAM_MECHANISMS:
            return {}
        return {self.username: credentials_to_config({self.mechanism: make_credential(self.mechanism, self.password)})}

    # -- the clients ------------------------------------------------------------------------------

    def _jaas(self) -> str:
        if self.mechanism == "OAUTHBEARER":
            return format_jaas(LOGIN_MODULES["OAUTHBEARER"], {"unsecuredLoginStringClaim_sub": self.username})
        return format_jaas(LOGIN_MODULES[self.mechanism], {"username": self.username, "password": self.password})

    def client_config(self, bootstrap: str | None = None) -> dict[str, str]:
        """Kafka's (Java) client keys: what `--command-config` and Kafka's tools read."""
        config = {"bootstrap.servers": bootstrap} if bootstrap else {}
        config["security.protocol"] = self.protocol
        if self.sasl:
            config.update({"sasl.mechanism": self.mechanism, "sasl.jaas.config": self._jaas()})
        if self.certs is not None:
            config.update(self.certs.client_ssl_config())
        return config

    def broker_client_config(self) -> dict[str, str]:
        """Kafka's client keys of the brokers' own PLAIN user (what creates the SCRAM user on a cluster)."""
        config = {"security.protocol": self.protocol}
        if self.sasl:
            config.update({"sasl.mechanism": "PLAIN", "sasl.jaas.config": format_jaas(
                LOGIN_MODULES["PLAIN"], {"username": BROKER_USER, "password": self.broker_password})})
        if self.certs is not None:
            config.update(self.certs.client_ssl_config())
        return config

    def confluent_config(self, bootstrap: str | None = None) -> dict[str, str]:
        """confluent-kafka's (librdkafka's) settings."""
        config = {"bootstrap.servers": bootstrap} if bootstrap else {}
        config["security.protocol"] = self.protocol
        if self.sasl:
            config["sasl.mechanism"] = self.mechanism
            if self.mechanism == "OAUTHBEARER":
                config.update({"enable.sasl.oauthbearer.unsecure.jwt": "true",
                               "sasl.oauthbearer.config": f"principal={self.username}"})
            else:
                config.update({"sasl.username": self.username, "sasl.password": self.password})
        if self.certs is not None:
            config["ssl.ca.location"] = str(self.certs.ca_file)
        return config

    def kafka_python_config(self, bootstrap: str | None = None) -> dict[str, Any]:
        """kafka-python's (and aiokafka's, bar ssl_context) keyword arguments."""
        config: dict[str, Any] = {"bootstrap_servers": bootstrap} if bootstrap else {}
        config["security_protocol"] = self.protocol
        if self.sasl:
            config["sasl_mechanism"] = self.mechanism
            if self.mechanism != "OAUTHBEARER":
                config.update({"sasl_plain_username": self.username, "sasl_plain_password": self.password})
        if self.certs is not None:
            config["ssl_cafile"] = str(self.certs.ca_file)
        return config

    def describe(self, bootstrap: str | None, properties: Path | None) -> str:
        """What the commands print: where the client settings are, and the same for the libraries."""
        where = bootstrap or "HOST:PORT"
        user = f", user {self.username} ({self.mechanism})" if self.sasl else ""
        lines = [f"dev security: {self.protocol}{user}"]
        if self.certs is not None:
            lines.append(f"  CA certificate: {self.certs.ca_file}")
        if properties is not None:
            lines += [f"  client properties: {properties}",
                      f"  try: kbroker topics list --bootstrap-server {where} --command-config {properties}"]
        lines.append(f"  confluent-kafka: {json.dumps(self.confluent_config(bootstrap))}")
        lines.append(f"  kafka-python: {json.dumps(self.kafka_python_config(bootstrap))}")
        return "\n".join(lines)


# -- files ---------------------------------------------------------------------------------------------

def _write_private(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


def _property_line(key: str, value: str) -> str:
    """key=value as java.util.Properties reads it back (backslashes doubled, leading blanks kept)."""
    value = value.replace("\\", "\\\\").replace("\n", "\\n")
    if value[:1] in (" ", "\t"):
        value = "\\" + value
    return f"{key}={value}"


def write_properties(path: str | Path, config: dict[str, str], comment: str) -> Path:
    """Keys as a Java .properties file, owner-only (it holds passwords)."""
    path = Path(path)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    text = f"# {comment}\n" + "".join(_property_line(k, v) + "\n" for k, v in config.items())
    _write_private(path, text.encode())
    return path


def write_client_properties(path: str | Path, config: dict[str, str]) -> Path:
    """Kafka client keys as a client.properties file (`--command-config`, Kafka's tools)."""
    return write_properties(path, config, "kbroker development client settings (Kafka's client keys; "
                                          "kbroker's --command-config and Kafka's tools read them)")


def write_scram_credential(data_dir: str | Path, users: dict[str, dict[str, str]]) -> None:
    """Add SCRAM credentials to a single node's store before it starts (the file's format is
    LocalMetadataStore's: {"version": 1, "users": {user: {mechanism: "salt=...,..."}}})."""
    path = Path(data_dir) / SCRAM_CREDENTIALS_FILE
    try:
        state = json.loads(path.read_text())
    except FileNotFoundError:
        state = {"version": 1, "users": {}}
    known = state.setdefault("users", {})
    for user, credentials in users.items():
        known[user] = {**known.get(user, {}), **credentials}
    state["users"] = dict(sorted(known.items()))
    Path(data_dir).mkdir(parents=True, exist_ok=True)
    _write_private(path, json.dumps(state, indent=1).encode())


def _state(directory: Path) -> dict[str, str]:
    """The setup's passwords, made once and kept (owner-only) for the next start."""
    path = directory / STATE_FILE
    try:
        state = json.loads(path.read_text())
        if all(isinstance(state.get(k), str) and state[k] for k in ("admin_password", "broker_password")):
            return state
    except (OSError, ValueError):
        pass
    state = {"admin_password": secrets.token_urlsafe(18), "broker_password": secrets.token_urlsafe(18)}
    directory.mkdir(parents=True, exist_ok=True)
    _write_private(path, json.dumps(state).encode())
    return state


def dev_setup(directory: str | Path, protocol: str = "SASL_SSL", hosts: tuple[str, ...] = ("localhost",),
              ips: tuple[str, ...] = ("127.0.0.1",)) -> SecuritySetup:
    """The development setup kept in `directory` (made on first use): certificates for `hosts` and
    `ips` when the protocol has TLS, the `admin` SCRAM-SHA-512 user when it has SASL."""
    protocol = DEV_PROTOCOLS.get(protocol.lower(), protocol.upper())
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    state = _state(directory)
    certs = dev_certificates(directory, hosts, ips) if protocol in ("SSL", "SASL_SSL") else None
    if protocol.startswith("SASL_"):
        return SecuritySetup(protocol, certs, "SCRAM-SHA-512", ADMIN_USER, state["admin_password"],
                             state["broker_password"])
    return SecuritySetup(protocol, certs)


# -- kbroker serve --dev-security --------------------------------------------------------------------

# keys --dev-security sets itself: an operator's own value for one of them would be silently lost
_SERVE_OWN_PREFIXES = ("ssl.", "sasl.", "listener.name.")
_SERVE_OWN_KEYS = ("listener.security.protocol.map", "inter.broker.listener.name", "security.inter.broker.protocol",
                   "advertised.listeners")
_ANY_HOST = ("", "0.0.0.0", "::")


def _is_ip(host: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def serve_overrides(config: Any) -> tuple[list[str], str]:
    """For `kbroker serve --dev-security`: the --override items that turn the configured single
    listener into a SASL_SSL one (host and port kept) with a dev certificate, SCRAM-SHA-512 and PLAIN,
    and the text to print (client settings). The `admin` user's credential is written into the data
    directory's SCRAM store unless it has one. StartupError (one line) when the config does not fit."""
    from kbroker.errors import StartupError

    if config.is_set("zookeeper.connect"):
        raise StartupError("--dev-security is for the single node; for a cluster use kbroker dev-cluster --security "
                           "sasl_ssl")
    own = sorted(k for k in config.explicit if k.startswith(_SERVE_OWN_PREFIXES) or k in _SERVE_OWN_KEYS)
    if own:
        raise StartupError(f"--dev-security sets the listener's security itself; remove {', '.join(own)} "
                           f"(or configure security without --dev-security)")
    listeners = config.listeners
    if len(listeners) != 1:
        raise StartupError(f"--dev-security secures one listener; listeners={config.get('listeners')} has "
                           f"{len(listeners)}")
    _name, host, port = listeners[0]
    data_dir = config.log_dirs[0]
    hosts, ips = ["localhost"], ["127.0.0.1"]
    if host not in _ANY_HOST and host not in hosts + ips:
        (ips if _is_ip(host) else hosts).append(host)
    try:
        setup = dev_setup(data_dir / "dev-security", "SASL_SSL", tuple(hosts), tuple(ips))
        store = data_dir / SCRAM_CREDENTIALS_FILE
        try:
            have = json.loads(store.read_text()).get("users", {}).get(setup.username, {})
        except FileNotFoundError:
            have = {}
        if setup.mechanism not in have:  # kept when it exists: `kbroker users alter` may have changed it
            write_scram_credential(data_dir, setup.scram_users())
        client_host = "127.0.0.1" if host in _ANY_HOST else host
        bootstrap = f"{client_host}:{port}" if port else None
        properties = write_client_properties(data_dir / "dev-security" / CLIENT_PROPERTIES, setup.client_config(bootstrap))
    except (OSError, ValueError) as exc:
        raise StartupError(f"--dev-security: cannot prepare {data_dir / 'dev-security'}: "
                           f"{getattr(exc, 'strerror', None) or exc}") from None
    text = setup.describe(bootstrap, properties)
    if bootstrap is None:
        text += "\n  (port 0: the broker's port is in its 'serving on' line)"
    overrides = [f"{k}={v}" for k, v in setup.broker_config(host, port).items()]
    return overrides, text


# -- kbroker dev-cluster --security ------------------------------------------------------------------

def create_scram_user(setup: SecuritySetup, bootstrap: str, timeout: float = 30.0) -> bool:
    """On a running cluster: create the setup's SCRAM user over its SASL listener, authenticated
    as the brokers' own PLAIN user (AlterUserScramCredentials), unless it has a credential already;
    then wait until every broker of `bootstrap` authenticates it (a ZooKeeper change notification
    reaches them within a second). True when it was created. AdminError when it cannot be."""
    import time

    from kio.schema.errors import ErrorCode

    from kbroker.admin.client import AdminClient, KafkaErrorResponse, parse_address
    from kbroker.admin.connection import Connection
    from kbroker.admin.security import client_security
    from kbroker.admin.users import (
        Upsertion,
        alter_user_scram_credentials,
        describe_user_scram_credentials,
    )

    if not setup.sasl or setup.mechanism not in SCRAM_MECHANISMS:
        return False
    created = False
    with AdminClient(bootstrap, timeout, client_security(setup.broker_client_config(), "the brokers' own user")) as admin:
        try:
            have = describe_user_scram_credentials(admin, [setup.username]).get(setup.username, [])
        except KafkaErrorResponse as exc:
            if exc.code != ErrorCode.resource_not_found:
                raise
            have = []
        if not any(c.mechanism == setup.mechanism for c in have):
            answers = alter_user_scram_credentials(admin, [Upsertion(setup.username, setup.mechanism, setup.password)])
            code, message = answers.get(setup.username, (int(ErrorCode.unknown_server_error), "no answer for the user"))
            if code != ErrorCode.none:
                raise KafkaErrorResponse(code, f"AlterUserScramCredentials for user {setup.username!r}", message)
            created = True
    as_user = client_security(setup.client_config(), f"user {setup.username}")
    for address in bootstrap.split(","):
        host, port = parse_address(address)
        deadline = time.monotonic() + timeout
        while True:
            try:
                Connection(host, port, timeout, as_user).close()
                break
            except KafkaErrorResponse as exc:
                if exc.code != ErrorCode.sasl_authentication_failed or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    return created
