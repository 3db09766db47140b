"""What a user's or client's stored entity config means, for both metadata stores (pure): a user's
config holds its SCRAM credentials (mechanism -> credential text, Kafka's user config) beside its
client quotas, a client's and a user/client pair's only quotas. The embedded store
(`store.LocalMetadataStore`) and the ZooKeeper one (`zk_user_configs.py`) apply AlterClientQuotas and
AlterUserScramCredentials with these, and keep the credentials the SASL server looks up.
"""

from __future__ import annotations

import logging

from kbroker.errors import ResourceNotFoundError
from kbroker.quota.entities import QUOTA_KEYS
from kbroker.security.credentials import ScramCredential, credentials_from_config, credentials_to_config

logger = logging.getLogger(__name__)


def quota_entries(config: dict[str, str]) -> dict[str, str]:
    """The client quota keys of an entity's stored config (a user's also holds SCRAM credentials)."""
    return {k: v for k, v in config.items() if k in QUOTA_KEYS}


def altered_quota_config(current: dict[str, str], changes: dict[str, str | None]) -> dict[str, str]:
    """An entity's stored config after an AlterClientQuotas: each key set, or removed (None); the
    other entries (a user's SCRAM credentials) kept."""
    updated = dict(current)
    for key, value in changes.items():
        if value is None:
            updated.pop(key, None)
        else:
            updated[key] = value
    return updated


SCRAM_DELETE_MISSING = "Attempt to delete a user credential that does not exist"  # Kafka's words


def altered_scram_config(current: dict[str, str], upsertions: dict[str, ScramCredential],
                         deletions: list[str]) -> dict[str, str]:
    """A user's config entries after an AlterUserScramCredentials: deletions first, then upsertions
    (as Kafka applies them); other entries (quotas) kept. ResourceNotFoundError when a deletion
    names a mechanism the user has no credential for."""
    if any(m not in current for m in deletions):
        raise ResourceNotFoundError(SCRAM_DELETE_MISSING)
    updated = {k: v for k, v in current.items() if k not in deletions}
    updated.update(credentials_to_config(upsertions))
    return updated


def remember_credentials(scram: dict[str, dict[str, ScramCredential]], user: str, config: dict[str, str]) -> None:
    """A user's credentials after a write of its config: kept in `scram` (user -> mechanism ->
    credential), or dropped when none is left."""
    creds = scram_credentials_of(user, config)
    if creds:
        scram[user] = creds
    else:
        scram.pop(user, None)


def scram_credentials_of(user: str, config: dict[str, str]) -> dict[str, ScramCredential]:
    """The credentials in a user's stored entries; an entry that is not one is logged (by user and
    mechanism only) and left out."""
    try:
        return credentials_from_config(config)
    except ValueError:
        out = {}
        for mechanism in config:
            try:
                out.update(credentials_from_config({mechanism: config[mechanism]}))
            except ValueError:
                logger.warning("the stored %s credential of user %r is not a SCRAM credential; ignored", mechanism, user)
        return out
