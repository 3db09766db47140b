"""`--command-config FILE`: read a Kafka client properties file into a `ClientSecurity`
(security.py). Apart from security.py because it parses with kbroker.config's Java-properties
reader, which the console (it imports the admin modules) may not import: `kbroker` (cli.py) reads
the file once, before running any command, and hands the result over as `args.client_security`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kbroker.admin.connection import AdminError
from kbroker.admin.security import ClientSecurity, client_security
from kbroker.config import parse_properties

__all__ = ["apply_command_config", "load_command_config", "read_client_properties"]


def read_client_properties(path: str | Path) -> dict[str, str]:
    """The keys of a Java properties file (UTF-8, or ISO-8859-1 as Java reads it when not UTF-8)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise AdminError(f"cannot read --command-config {path}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return parse_properties(text)


def load_command_config(path: str | Path, *, require_credentials: bool = True) -> ClientSecurity:
    """The client security a --command-config file sets; AdminError (one line) when it cannot.
    `require_credentials=False`: SASL settings without sasl.jaas.config's username and password
    are accepted (security.client_security)."""
    return client_security(read_client_properties(path), f"--command-config {path}",
                           require_credentials=require_credentials)


def apply_command_config(args: Any) -> None:
    """Read a parsed command's --command-config (if it has one) into `args.client_security`. A
    command whose parser sets `command_config_requires_credentials` (a function of the parsed
    args; `kbroker console`: not with --login) decides whether the file must hold a username and
    password; every other command needs them."""
    path = getattr(args, "command_config", None)
    if path:
        requires = getattr(args, "command_config_requires_credentials", None)
        args.client_security = load_command_config(
            path, require_credentials=True if requires is None else bool(requires(args)))
