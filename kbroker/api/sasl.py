"""SaslHandshake (17) and SaslAuthenticate (36): the Kafka-framed steps of a SASL exchange, answered
from the connection's session (security/session.py decides; the server closes the connection after
a failure, once `connection.failed.authentication.delay.ms` has passed)."""

from __future__ import annotations

import time

from kbroker.api.context import RequestContext
from kbroker.errors import ErrorCode
from kbroker.wire.protocol import ProtocolError


async def sasl_handshake(ctx: RequestContext, request) -> dict:
    session = ctx.session
    if session is None:
        raise ProtocolError("SaslHandshake on a connection without a session")
    error, mechanisms = session.handshake(ctx.version, request.mechanism)
    return {"error_code": error, "mechanisms": mechanisms}


async def sasl_authenticate(ctx: RequestContext, request) -> dict:
    session = ctx.session
    if session is None or session.unframed_tokens:
        raise ProtocolError("SaslAuthenticate outside a SASL exchange")
    step = session.authenticate(request.auth_bytes, int(time.time() * 1000))
    return {"error_code": step.error, "error_message": step.message if step.error != ErrorCode.none else None,
            "auth_bytes": step.token, "session_lifetime": step.session_lifetime_ms}
