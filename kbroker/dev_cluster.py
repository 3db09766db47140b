"""`kbroker dev-cluster`: a ZooKeeper-mode cluster on this machine, for development.

    kbroker dev-cluster --brokers 3 [--zookeeper HOST:PORT] [--dir ./kbroker-cluster] [--override key=value ...]
                        [--security ssl|sasl_plaintext|sasl_ssl] [--base-port 9092] [--zookeeper-port 2181]
                        [--advertise-host localhost]

Starts a ZooKeeper server (Debian's `zookeeper` package), or uses an existing one with
`--zookeeper`, and N brokers (ids 1..N) on 127.0.0.1, on the ports applications are configured
for: broker i on `--base-port` + i - 1 (9092, 9093, ...), ZooKeeper on `--zookeeper-port` (2181).
A port already in use is replaced by a free one, said on stderr (`port 9092 is in use: broker 1
listens on 127.0.0.1:40411 instead`); port 0 asks for free ports. `--advertise-host` is the host
the brokers give clients in Metadata (advertised.listeners), e.g. `localhost`, while they listen
on 127.0.0.1. Broker i keeps its data and log in
`<dir>/broker-i/`, the cluster lives under the chroot `/kbroker`, and the internal topics are
replicated min(3, N) times. It prints every process with its PID, the bootstrap list on one line
(`bootstrap: host:port,...`) and where the logs are, then runs until Ctrl-C, SIGTERM or SIGHUP:
the brokers are sent SIGTERM (a controlled shutdown, killed after 30 s), then ZooKeeper is stopped.

`--security` serves the brokers' one listener as SSL, SASL_PLAINTEXT or SASL_SSL (no PLAINTEXT
port): a throwaway CA and certificate for 127.0.0.1/localhost, SCRAM-SHA-512 and PLAIN, the
brokers' own PLAIN user between them, and an `admin` SCRAM-SHA-512 user created over the secured
listener (kbroker.dev_security). Everything is kept in `<dir>/dev-security/`: the client settings
(`client.properties`, for `--command-config`), printed with their confluent-kafka and kafka-python
equivalents, stay valid across restarts of the same directory.

Exit status: 0 after a clean stop; 1 when a broker exited on its own or had to be killed; 2 when
the cluster could not start (ZooKeeper missing or unreachable, a broker failing to start, bad
options), after stopping whatever it had started. Every process is started and stopped by PID
(`kbroker.cluster_runner`); nothing else on the machine is touched.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

from kbroker.admin.connection import AdminError
from kbroker.cluster_runner import ClusterError, LocalCluster, ZooKeeperServer, zookeeper_classpath

PROG = "kbroker dev-cluster"
DEFAULT_DIR = Path("kbroker-cluster")
DEFAULT_BASE_PORT, DEFAULT_ZOOKEEPER_PORT = 9092, 2181  # what applications' configs already name
HOST = "127.0.0.1"
# set by the runner for each broker: one value for all would break the cluster
DEFAULT_REGISTRY_PORT = 8081
RESERVED = ("broker.id", "zookeeper.connect", "listeners", "advertised.listeners", "log.dir", "log.dirs")
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def add_dev_cluster_command(sub: Any) -> None:
    """Add `dev-cluster` to the `kbroker` subcommands."""
    cmd = sub.add_parser(
        "dev-cluster", help="run a local ZooKeeper-mode cluster (ZooKeeper and N brokers on 127.0.0.1) until Ctrl-C",
        description="Start ZooKeeper (or use --zookeeper) and N brokers on 127.0.0.1, print the bootstrap list, "
                    "and stop everything on Ctrl-C or SIGTERM.")
    cmd.add_argument("--brokers", type=int, required=True, metavar="N", help="number of brokers (ids 1..N)")
    cmd.add_argument("--zookeeper", metavar="HOST:PORT",
                     help="an existing ZooKeeper to use (the cluster goes under /kbroker) instead of starting one")
    cmd.add_argument("--dir", type=Path, default=DEFAULT_DIR, metavar="DIR",
                     help=f"where data and logs go: DIR/broker-i/, DIR/zookeeper/ (default ./{DEFAULT_DIR})")
    cmd.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                     help="a broker config for every broker (repeatable)")
    cmd.add_argument("--security", choices=("ssl", "sasl_plaintext", "sasl_ssl"),
                     help="secure the listener (development only): a throwaway CA and certificate, SCRAM-SHA-512 "
                          "and PLAIN, an admin user; client settings in DIR/dev-security/client.properties")
    cmd.add_argument("--base-port", type=int, default=DEFAULT_BASE_PORT, metavar="PORT",
                     help=f"broker i listens on PORT + i - 1 (default {DEFAULT_BASE_PORT}: {DEFAULT_BASE_PORT}, "
                          f"{DEFAULT_BASE_PORT + 1}, ...); a port in use is replaced by a free one; 0: free ports")
    cmd.add_argument("--zookeeper-port", type=int, default=None, metavar="PORT",
                     help=f"the port of the ZooKeeper it starts (default {DEFAULT_ZOOKEEPER_PORT}; in use: a free "
                          f"one; 0: a free one)")
    cmd.add_argument("--schema-registry-port", type=int, default=DEFAULT_REGISTRY_PORT, metavar="PORT",
                     help=f"broker i serves the schema registry on PORT + i - 1 (default {DEFAULT_REGISTRY_PORT}; "
                          f"any broker's answers the same; in use: a free port; 0: free ports)")
    cmd.add_argument("--no-schema-registry", action="store_true", help="serve no schema registry")
    cmd.add_argument("--advertise-host", metavar="HOST",
                     help="the host the brokers advertise to clients (advertised.listeners), e.g. localhost; "
                          "they listen on 127.0.0.1 either way")


class _Stop(BaseException):
    """A stop signal arrived (a BaseException, so no `except Exception` on the way swallows it)."""


class _Signals:
    """SIGINT/SIGTERM/SIGHUP raise `_Stop` once; later ones, while stopping, only say so."""

    def __init__(self) -> None:
        self.stopping = False
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        for signum in _SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)

    def restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.stopping:
            # os.write: print() here could re-enter a print the signal interrupted
            os.write(2, f"{PROG}: still stopping (brokers get 30 s for a controlled shutdown)\n".encode())
            return
        self.stopping = True
        raise _Stop(signum)


def _brokers(n: int) -> str:
    return f"{n} broker{'s' if n != 1 else ''}"


def _fail(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)
    return 2


# the keys --security sets on every broker
_SECURITY_PREFIXES = ("ssl.", "sasl.", "listener.name.")
_SECURITY_KEYS = ("listener.security.protocol.map", "inter.broker.listener.name", "security.inter.broker.protocol")


def _parse_overrides(items: list[str], security: str | None = None) -> dict[str, str] | str:
    """The overrides as a dict, or the reason they are refused."""
    from kbroker.config import BrokerConfig
    from kbroker.errors import KafkaError

    overrides: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            return f"--override needs key=value, got {item!r}"
        if key in RESERVED:
            return f"--override {key} is not allowed: dev-cluster sets it for each broker"
        if security and (key.startswith(_SECURITY_PREFIXES) or key in _SECURITY_KEYS):
            return f"--override {key} is not allowed with --security {security}: it sets the listener's security"
        overrides[key] = value
    try:
        config = BrokerConfig.from_dict(overrides)
    except KafkaError as exc:
        return str(exc)
    for key in config.unknown:
        print(f"{PROG}: warning: unknown config {key} (the brokers ignore it)", file=sys.stderr)
    return overrides


def port_free(port: int, host: str = HOST) -> bool:
    """Whether a listener could bind `host:port` now (with SO_REUSEADDR, as the brokers and
    ZooKeeper bind: a port whose last connections linger in TIME_WAIT counts as free)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def choose_ports(wanted: list[int], is_free=port_free, pick_free=None) -> tuple[list[int], list[int]]:
    """The port to use for each of `wanted`: itself when free, else (and for 0) a free port, never
    one chosen twice; and the indexes of the wanted ports that could not be had."""
    from kbroker.cluster_runner import free_port

    pick_free = pick_free or free_port
    chosen: list[int] = []
    replaced: list[int] = []
    for i, port in enumerate(wanted):
        if port and port not in chosen and is_free(port):
            chosen.append(port)
            continue
        other = pick_free()
        while other in chosen or other in wanted:
            other = pick_free()
        chosen.append(other)
        if port:
            replaced.append(i)
    return chosen, replaced


def _check_ports(args: argparse.Namespace) -> str | None:
    """Why the port options are refused, or None."""
    if not 0 <= args.base_port <= 65535 or (args.base_port and args.base_port + args.brokers - 1 > 65535):
        return f"--base-port must leave room for {_brokers(args.brokers)} below 65536 (or be 0), got {args.base_port}"
    if args.zookeeper_port is not None and args.zookeeper is not None:
        return "--zookeeper-port is the port of the ZooKeeper dev-cluster starts; with --zookeeper it starts none"
    if args.zookeeper_port is not None and not 0 <= args.zookeeper_port <= 65535:
        return f"--zookeeper-port must be a port (0 to 65535), got {args.zookeeper_port}"
    if args.advertise_host is not None and (not args.advertise_host.strip()
                                            or re.search(r"[\s,/]", args.advertise_host)):
        return f"--advertise-host needs a host name or address, got {args.advertise_host!r}"
    return None


def _plan_ports(args: argparse.Namespace, starts_zookeeper: bool) -> tuple[dict[int, int], int]:
    """Each broker's port and ZooKeeper's (0 when it is not started here); a port in use is said
    on stderr with the free one taken instead."""
    ids = list(range(1, args.brokers + 1))
    wanted = [args.base_port + i - 1 if args.base_port else 0 for i in ids]
    zk_port = DEFAULT_ZOOKEEPER_PORT if args.zookeeper_port is None else args.zookeeper_port
    wanted_zk = [zk_port] if starts_zookeeper else []
    ports = wanted + wanted_zk
    chosen, replaced = choose_ports(ports)
    names = [f"broker {i}" for i in ids] + ["ZooKeeper"] * len(wanted_zk)
    for i in replaced:
        print(f"{PROG}: port {ports[i]} is in use: {names[i]} listens on {HOST}:{chosen[i]} instead",
              file=sys.stderr, flush=True)
    return dict(zip(ids, chosen)), (chosen[-1] if starts_zookeeper else 0)


def _plan_registries(args: argparse.Namespace, overrides: dict[str, str], security: str | None) -> dict[int, str]:
    """Each broker's schema registry URL (https with a TLS listener); none with --no-schema-registry
    or when --override sets schema.registry.listener itself."""
    if args.no_schema_registry or "schema.registry.listener" in overrides:
        return {}
    ids = list(range(1, args.brokers + 1))
    base = args.schema_registry_port
    wanted = [base + i - 1 if base and base + i - 1 <= 65535 else 0 for i in ids]
    chosen, replaced = choose_ports(wanted)
    for i in replaced:
        print(f"{PROG}: port {wanted[i]} is in use: broker {ids[i]}'s schema registry listens on {HOST}:{chosen[i]} "
              f"instead", file=sys.stderr, flush=True)
    scheme = "https" if security in ("ssl", "sasl_ssl") else "http"
    return {i: f"{scheme}://{HOST}:{port}" for i, port in zip(ids, chosen)}


def _zookeeper_reachable(connect: str) -> str | None:
    """None if something listens at the first HOST:PORT of `connect`, else why not."""
    first = connect.split(",")[0].split("/")[0]
    host, sep, port = first.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return f"--zookeeper needs HOST:PORT, got {connect!r}"
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=5):
            return None
    except OSError as exc:
        return f"cannot reach ZooKeeper at {first} ({exc.strerror or exc})"


def _lock(base: Path):
    """Hold `base/dev-cluster.lock` for the run: two clusters on one directory would share data."""
    import fcntl

    handle = (base / "dev-cluster.lock").open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return None
    return handle


def _last_line(path: Path | None) -> str:
    """The last non-empty line of a log (a broker's one-line start-up error is its last words)."""
    try:
        with open(path, "rb") as f:  # type: ignore[arg-type]
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 8192))
            text = f.read().decode(errors="replace")
    except (OSError, TypeError):
        return ""
    # a traceback inside an exception group is framed: "  | Error: ...", "  +------"
    lines = [line.strip().lstrip("|").strip() for line in text.splitlines()]
    lines = [line for line in lines if line.strip("+-")]
    line = lines[-1] if lines else ""
    return line if len(line) <= 300 else line[:297] + "..."


def _start_error(exc: ClusterError, cluster: LocalCluster, zk_log: Path) -> str:
    """One line for a start-up failure: what failed, its last words, where its log is."""
    summary = str(exc).split(": ", 1)[0].split("\n", 1)[0]
    match = re.match(r"broker (\d+) ", summary)
    if match and int(match.group(1)) in cluster.brokers:
        broker = cluster.brokers[int(match.group(1))]
        detail = _last_line(broker.log_path)
        return f"{summary} during start-up{': ' + detail if detail else ''} (log: {broker.log_path})"
    if summary.startswith("ZooKeeper"):
        return f"{summary} (log: {zk_log})"
    return summary


def _children() -> list[int]:
    """Live processes whose parent is this one (Linux); [] where /proc is not available."""
    me, found = os.getpid(), []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) "
        if len(fields) > 1 and fields[0] != "Z" and int(fields[1]) == me:
            found.append(int(entry))
    return found


def _reap_strays() -> None:
    """A process this one started but lost track of (a signal landing inside a process start):
    stop it by PID like the others."""
    strays = _children()
    for pid in strays:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    for pid in strays:
        while time.monotonic() < deadline:
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    break
            except ChildProcessError:
                break
            time.sleep(0.1)
        else:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass


def _stop(cluster: LocalCluster, grace_s: float = 30.0) -> list[str]:
    """Stop the brokers (controlled shutdowns) and ZooKeeper; the brokers that did not stop
    cleanly, as messages."""
    running, killed = cluster.stop(grace_s)
    problems = []
    for broker_id, broker in cluster.brokers.items():
        if broker_id in killed:
            problems.append(f"broker {broker_id} did not stop within {grace_s:g} s and was killed")
        elif broker.proc is not None and broker.proc.returncode != 0:
            when = "" if any(b is broker for b in running) else " before the stop"
            problems.append(f"broker {broker_id} exited with status {broker.proc.returncode}{when} "
                            f"(log: {broker.log_path})")
    _reap_strays()
    return problems


def _secure(cluster: LocalCluster, directory: Path, security: str):
    """Set the cluster up for `--security`: the brokers' security keys in an owner-only
    server.properties they all read, the listener's protocol, the readiness check's TLS (the
    certificate also names the advertised host)."""
    import ipaddress
    import ssl

    from kbroker.dev_security import dev_setup, write_properties

    hosts, ips = ["localhost"], [HOST]
    extra = cluster.advertised_host
    if extra and extra not in hosts + ips:
        try:
            ipaddress.ip_address(extra)
            ips.append(extra)
        except ValueError:
            hosts.append(extra)
    setup = dev_setup(directory, security, tuple(hosts), tuple(ips))
    keys = {k: v for k, v in setup.broker_config().items() if k != "listeners"}  # each broker gets its own
    cluster.config_file = write_properties(directory / "server-security.properties", keys,
                                           f"kbroker dev-cluster --security {security}: every broker's listener keys")
    cluster.protocol = setup.protocol
    if setup.certs is not None:
        cluster.ssl_context = ssl.create_default_context(cafile=str(setup.certs.ca_file))
    return setup


def _admin_user(setup, cluster: LocalCluster) -> None:
    from kbroker.dev_security import create_scram_user

    if setup.sasl and create_scram_user(setup, cluster.bootstrap):
        print(f"{PROG}: created SCRAM user {setup.username} ({setup.mechanism})", flush=True)


def _describe_security(setup, cluster: LocalCluster, directory: Path) -> None:
    from kbroker.dev_security import CLIENT_PROPERTIES, write_client_properties

    bootstrap = client_bootstrap(cluster)
    properties = write_client_properties(directory / CLIENT_PROPERTIES, setup.client_config(bootstrap))
    print(setup.describe(bootstrap, properties), flush=True)


def client_bootstrap(cluster: LocalCluster) -> str:
    """The bootstrap list clients are given: the advertised host (else 127.0.0.1) and each port."""
    return ",".join(f"{cluster.advertised_host or b.host}:{b.port}" for b in cluster.brokers.values())


def _describe(cluster: LocalCluster, base: Path) -> None:
    for broker_id, broker in cluster.brokers.items():
        advertised = f", advertised as {cluster.advertised_host}:{broker.port}" if cluster.advertised_host else ""
        print(f"broker {broker_id}: {broker.address} (pid {broker.proc.pid}){advertised}, "
              f"data: {broker.data_dir / 'data'}, log: {broker.log_path}")
    print(f"bootstrap: {client_bootstrap(cluster)}")
    registries = [o["schema.registry.listener"] for o in cluster.broker_overrides.values()
                  if "schema.registry.listener" in o]
    if registries:
        print(f"schema registry: {', '.join(registries)} (any one; schema.registry.url)")
    logs = [str(base / "broker-*" / "broker.log")]
    if cluster.zookeeper is not None:
        logs.append(str(cluster.zookeeper.log_path))
    print(f"logs: {', '.join(logs)}")
    factor = min(3, len(cluster.brokers))
    print(f"{PROG}: {_brokers(len(cluster.brokers))} running (internal topics replicated {factor} "
          f"time{'s' if factor > 1 else ''}); Ctrl-C stops the cluster", flush=True)


def _watch(cluster: LocalCluster) -> None:
    """Until a stop signal: report processes that exit on their own (they are not restarted)."""
    reported: set[str] = set()
    while True:
        time.sleep(1.0)
        for broker_id, broker in cluster.brokers.items():
            name = f"broker {broker_id}"
            if not broker.running and name not in reported:
                reported.add(name)
                print(f"{PROG}: {name} exited with status {broker.proc.returncode}: "
                      f"{_last_line(broker.log_path)} (log: {broker.log_path})", file=sys.stderr, flush=True)
        zk = cluster.zookeeper
        if zk is not None and zk.proc is not None and zk.proc.poll() is not None and "zookeeper" not in reported:
            reported.add("zookeeper")
            print(f"{PROG}: ZooKeeper exited with status {zk.proc.returncode} (log: {zk.log_path})",
                  file=sys.stderr, flush=True)


def run_dev_cluster(args: argparse.Namespace) -> int:
    if args.brokers < 1:
        return _fail(f"--brokers must be at least 1, got {args.brokers}")
    security = getattr(args, "security", None)
    overrides = _parse_overrides(args.override, security)
    if isinstance(overrides, str):
        return _fail(overrides)
    problem = _check_ports(args)
    if problem is not None:
        return _fail(problem)
    if args.zookeeper is None:
        if zookeeper_classpath() is None:
            return _fail("ZooKeeper is not installed (Debian: apt-get install zookeeper) or java is missing; "
                         "or pass --zookeeper HOST:PORT")
    else:
        problem = _zookeeper_reachable(args.zookeeper)
        if problem is not None:
            return _fail(problem)
    base = args.dir.resolve()
    try:
        base.mkdir(parents=True, exist_ok=True)
        lock = _lock(base)
    except OSError as exc:
        return _fail(f"cannot use {base}: {exc.strerror or exc}")
    if lock is None:
        return _fail(f"{base} is in use by another dev-cluster")

    setup = None
    broker_ports, zookeeper_port = _plan_ports(args, starts_zookeeper=args.zookeeper is None)
    registries = _plan_registries(args, overrides, security)
    cluster = LocalCluster(base, args.brokers, overrides=overrides, zookeeper_connect=args.zookeeper,
                           broker_ports=broker_ports, advertised_host=args.advertise_host,
                           broker_overrides={i: {"schema.registry.listener": url} for i, url in registries.items()})
    if security:
        try:
            setup = _secure(cluster, base / "dev-security", security)
        except (OSError, ValueError) as exc:
            lock.close()
            return _fail(f"cannot prepare {base / 'dev-security'}: {getattr(exc, 'strerror', None) or exc}")
    zk_log = base / "zookeeper" / "zookeeper.log"
    signals = _Signals()
    signals.install()
    started = False
    try:
        try:
            if args.zookeeper is None:
                print(f"{PROG}: starting ZooKeeper and {_brokers(args.brokers)} in {base}", flush=True)
                # registered before it starts, so a stop during its start-up stops it too
                cluster.zookeeper = ZooKeeperServer(base / "zookeeper", port=zookeeper_port)
                cluster.zookeeper.start()
                cluster.zookeeper_connect = cluster.zookeeper.connect
                print(f"zookeeper: {cluster.zookeeper.connect} (pid {cluster.zookeeper.proc.pid}), "
                      f"log: {cluster.zookeeper.log_path}", flush=True)
            else:
                print(f"{PROG}: starting {_brokers(args.brokers)} in {base}", flush=True)
                print(f"zookeeper: {args.zookeeper} (not started here)", flush=True)
            cluster.start()
            if setup is not None:
                _admin_user(setup, cluster)
        except (ClusterError, OSError, AdminError) as exc:
            signals.stopping = True
            _stop(cluster)
            _reap_strays()
            if isinstance(exc, ClusterError):
                return _fail(_start_error(exc, cluster, zk_log))
            if isinstance(exc, AdminError):
                return _fail(f"cannot create the {setup.username if setup else ''} user: {exc}")
            return _fail(f"cannot start the cluster: {exc}")
        started = True
        print(f"zookeeper chroot: {cluster.chroot}", flush=True)
        if setup is not None:
            _describe_security(setup, cluster, base / "dev-security")
        _describe(cluster, base)
        _watch(cluster)
        return 0  # not reached: _watch ends with a stop signal
    except _Stop:
        signals.stopping = True
        if not started:  # interrupted while starting: whatever started is stopped, statuses do not matter
            _stop(cluster)
            print(f"{PROG}: interrupted during start-up; stopped", flush=True)
            return 0
        then = ", then ZooKeeper" if cluster.zookeeper is not None else ""
        print(f"{PROG}: stopping {_brokers(len(cluster.brokers))} (controlled shutdown){then}", flush=True)
        problems = _stop(cluster)
        for problem in problems:
            print(f"{PROG}: {problem}", file=sys.stderr)
        print(f"{PROG}: stopped", flush=True)
        return 1 if problems else 0
    finally:
        signals.stopping = True
        if any(b.running for b in cluster.brokers.values()) or (
                cluster.zookeeper is not None and cluster.zookeeper.proc is not None
                and cluster.zookeeper.proc.poll() is None):
            _stop(cluster)  # an unexpected error: never leave processes behind
        _reap_strays()
        signals.restore()
        lock.close()
