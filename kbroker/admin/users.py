"""SCRAM users over the Kafka protocol (DescribeUserScramCredentials, AlterUserScramCredentials),
and `kbroker users`, what `kafka-configs.sh --entity-type users --alter --add-config
'SCRAM-SHA-512=[password=...]'` and `kafka-configs.sh --describe` do for SCRAM credentials.

    kbroker users add USER (--password-stdin | --password P) [--mechanism M] [--iterations N]
        a user that has no SCRAM credential yet (an existing user is refused: DUPLICATE_RESOURCE)
    kbroker users alter USER (--password-stdin | --password P) [--mechanism M] [--iterations N]
        set (or replace) the credential of a user that has one already (else RESOURCE_NOT_FOUND)
    kbroker users list [USER ...] [--output table|json]
        user, mechanism and iterations of every user (or of those named)
    kbroker users delete USER [--mechanism M]
        one credential of the user, or all of them

Kafka's AlterUserScramCredentials always upserts; `add` and `alter` look first (DescribeUserScram-
Credentials) so that a typo does not create a user or replace a password unnoticed (another admin
may still act between the look and the change). The password never leaves this process: the
client salts it (a random salt, PBKDF2 with the mechanism's hash, `iterations` rounds) and sends
the salt and salted password, as Kafka's admin clients do. Every command takes --bootstrap-server,
--command-config (a secured listener's client properties) and --timeout; a failure is one line
on stderr with Kafka's error name, and exit status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from typing import Any, Iterable

from kio.schema.errors import ErrorCode

from kbroker.admin.client import DEFAULT_TIMEOUT_S, AdminClient, AdminError, KafkaErrorResponse
from kbroker.admin.connection import Connection
from kbroker.admin.security import add_command_config_argument, security_of
from kbroker.security.credentials import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    mechanism_by_type,
    salted_password,
)
from kbroker.wire.protocol import api_name

DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 50, 51
DEFAULT_MECHANISM = "SCRAM-SHA-512"
SALT_BYTES = 32


@dataclass(frozen=True)
class CredentialInfo:
    mechanism: str  # Kafka's name, or UNKNOWN(<code>) for a code this client does not know
    iterations: int


@dataclass(frozen=True)
class Upsertion:
    user: str
    mechanism: str
    password: str | bytes
    iterations: int = DEFAULT_ITERATIONS
    salt: bytes | None = None  # random when not given

    def __repr__(self) -> str:  # never the password
        return f"Upsertion({self.user!r}, {self.mechanism}, iterations={self.iterations})"


def _connection(admin: AdminClient, api_key: int) -> Connection:
    connection = admin.any_connection()
    if api_key not in connection.versions:
        raise AdminError(f"the broker at {connection.address} does not serve {api_name(api_key)}")
    return connection


def _mechanism_type(mechanism: str) -> int:
    try:
        return MECHANISMS[mechanism][1]
    except KeyError:
        raise AdminError(f"unknown SCRAM mechanism {mechanism!r}: one of {', '.join(MECHANISMS)}") from None


def _mechanism_name(code: int) -> str:
    return mechanism_by_type(code) or f"UNKNOWN({code})"


def describe_user_scram_credentials(admin: AdminClient, users: Iterable[str] | None = None
                                    ) -> dict[str, list[CredentialInfo]]:
    """Every user's credentials (None), or those of the users named: KafkaErrorResponse for the
    first user the broker answers with an error (RESOURCE_NOT_FOUND for one without credentials)."""
    names = None if users is None else list(users)
    body = _connection(admin, DESCRIBE_USER_SCRAM_CREDENTIALS).call(
        DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": None if names is None else [{"name": u} for u in names]}, version=0)
    if body.error_code != ErrorCode.none:
        raise KafkaErrorResponse(body.error_code, "DescribeUserScramCredentials", body.error_message)
    out: dict[str, list[CredentialInfo]] = {}
    for result in body.results:
        if result.error_code != ErrorCode.none:
            raise KafkaErrorResponse(result.error_code, f"DescribeUserScramCredentials for user {result.user!r}",
                                     result.error_message)
        out[result.user] = [CredentialInfo(_mechanism_name(c.mechanism), int(c.iterations))
                            for c in result.credential_infos]
    return out


def alter_user_scram_credentials(admin: AdminClient, upsertions: Iterable[Upsertion] = (),
                                 deletions: Iterable[tuple[str, str]] = ()) -> dict[str, tuple[int, str | None]]:
    """Send the upsertions (salted here) and deletions ((user, mechanism)); returns each user's
    (error code, message) as the broker answered it."""
    ups = []
    for u in upsertions:
        code = _mechanism_type(u.mechanism)
        salt = os.urandom(SALT_BYTES) if u.salt is None else u.salt
        ups.append({"name": u.user, "mechanism": code, "iterations": u.iterations, "salt": salt,
                    "salted_password": salted_password(u.mechanism, u.password, salt, u.iterations)})
    dels = [{"name": user, "mechanism": _mechanism_type(m)} for user, m in deletions]
    body = _connection(admin, ALTER_USER_SCRAM_CREDENTIALS).call(
        ALTER_USER_SCRAM_CREDENTIALS, {"upsertions": ups, "deletions": dels}, version=0)
    return {r.user: (int(r.error_code), r.error_message) for r in body.results}


def _check(answers: dict[str, tuple[int, str | None]], user: str) -> None:
    code, message = answers.get(user, (int(ErrorCode.unknown_server_error), "no result for the user"))
    if code != ErrorCode.none:
        raise KafkaErrorResponse(code, f"AlterUserScramCredentials for user {user!r}", message)


def _existing(admin: AdminClient, user: str) -> list[CredentialInfo]:
    """The user's credentials, [] for a user without any."""
    try:
        return describe_user_scram_credentials(admin, [user]).get(user, [])
    except KafkaErrorResponse as exc:
        if exc.code == ErrorCode.resource_not_found and user != "":
            return []
        raise


# -- the command -------------------------------------------------------------------------------------

def add_users_command(sub: Any) -> None:
    """Add `users` to the `kbroker` subcommands."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT[,HOST:PORT...]",
                        help="a broker to start from (default 127.0.0.1:9092)")
    add_command_config_argument(common)
    common.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS")
    password = argparse.ArgumentParser(add_help=False)
    source = password.add_mutually_exclusive_group(required=True)
    source.add_argument("--password-stdin", action="store_true",
                        help="read the password from the first line of standard input")
    source.add_argument("--password", metavar="PASSWORD",
                        help="the password (visible to other users of this machine: prefer --password-stdin)")
    password.add_argument("--mechanism", default=DEFAULT_MECHANISM, choices=tuple(MECHANISMS))
    password.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS,
                          help=f"PBKDF2 rounds, {MIN_ITERATIONS}..{MAX_ITERATIONS} (default {DEFAULT_ITERATIONS})")

    users = sub.add_parser("users", help="add, alter, list and delete SCRAM users (kafka-configs.sh --entity-type users)")
    usub = users.add_subparsers(dest="users_command", required=True)
    add = usub.add_parser("add", parents=[common, password], help="a new user with a SCRAM credential")
    add.add_argument("user")
    alter = usub.add_parser("alter", parents=[common, password], help="set the credential of an existing user")
    alter.add_argument("user")
    lst = usub.add_parser("list", parents=[common], help="users with their mechanisms and iterations")
    lst.add_argument("user", nargs="*", help="only these users")
    lst.add_argument("--output", choices=("table", "json"), default="table")
    delete = usub.add_parser("delete", parents=[common], help="delete a user's credentials")
    delete.add_argument("user")
    delete.add_argument("--mechanism", choices=tuple(MECHANISMS), help="only this one (default: all of them)")


def _password(args: argparse.Namespace) -> str:
    if args.password_stdin:
        line = sys.stdin.readline()
        text = line[:-1] if line.endswith("\n") else line
        text = text[:-1] if text.endswith("\r") else text
    else:
        text = args.password
    if not text:
        raise AdminError("the password is empty")
    return text


def _upsert(admin: AdminClient, args: argparse.Namespace, must_exist: bool) -> int:
    existing = _existing(admin, args.user)
    if must_exist and not existing:
        raise KafkaErrorResponse(ErrorCode.resource_not_found, f"users alter {args.user!r}",
                                 "the user has no SCRAM credential; `kbroker users add` creates it")
    if not must_exist and existing:
        raise KafkaErrorResponse(ErrorCode.duplicate_resource, f"users add {args.user!r}",
                                 f"the user exists ({', '.join(c.mechanism for c in existing)}); "
                                 f"`kbroker users alter` changes its credential")
    answers = alter_user_scram_credentials(
        admin, [Upsertion(args.user, args.mechanism, _password(args), args.iterations)])
    _check(answers, args.user)
    print(f"{'Altered' if must_exist else 'Added'} {args.mechanism} credential of user {args.user} "
          f"({args.iterations} iterations).")
    return 0


def _list(admin: AdminClient, args: argparse.Namespace) -> int:
    from kbroker.admin.groups import format_table

    found = describe_user_scram_credentials(admin, args.user or None)
    rows = [(user, c.mechanism, c.iterations) for user in sorted(found) for c in found[user]]
    if args.output == "json":
        print(json.dumps([{"user": u, "mechanism": m, "iterations": i} for u, m, i in rows], indent=2))
    else:
        print(format_table(("USER", "MECHANISM", "ITERATIONS"), rows))
    return 0


def _delete(admin: AdminClient, args: argparse.Namespace) -> int:
    if args.mechanism is not None:
        mechanisms = [args.mechanism]
    else:
        found = describe_user_scram_credentials(admin, [args.user])
        mechanisms = [c.mechanism for c in found.get(args.user, []) if c.mechanism in MECHANISMS]
    answers = alter_user_scram_credentials(admin, deletions=[(args.user, m) for m in mechanisms])
    _check(answers, args.user)
    print(f"Deleted {', '.join(mechanisms)} credential{'s' if len(mechanisms) > 1 else ''} of user {args.user}.")
    return 0


def run_users(args: argparse.Namespace) -> int:
    """Run a parsed `kbroker users ...`; 0 on success, 1 with one line on stderr on failure."""
    try:
        if args.users_command in ("add", "alter") and not MIN_ITERATIONS <= args.iterations <= MAX_ITERATIONS:
            raise KafkaErrorResponse(ErrorCode.unacceptable_credential, f"users {args.users_command} {args.user!r}",
                                     f"iterations must be {MIN_ITERATIONS}..{MAX_ITERATIONS}")
        with AdminClient(args.bootstrap_server, args.timeout, security_of(args)) as admin:
            if args.users_command == "add":
                return _upsert(admin, args, must_exist=False)
            if args.users_command == "alter":
                return _upsert(admin, args, must_exist=True)
            if args.users_command == "list":
                return _list(admin, args)
            return _delete(admin, args)
    except (AdminError, OSError) as exc:
        print(f"kbroker users: {exc}", file=sys.stderr)
        return 1
