"""ApiVersions: the exact API version ranges kbroker implements (the dispatch table's ranges)."""

from __future__ import annotations

import struct

from kbroker.api.context import RequestContext
from kbroker.errors import ErrorCode


async def handle(ctx: RequestContext, request) -> dict:
    from kbroker.api.dispatch import DISPATCH, served

    return {
        "error_code": ErrorCode.none,
        "api_keys": [
            {"api_key": key, "min_version": spec.min_version, "max_version": spec.max_version}
            for key, spec in sorted(DISPATCH.items())
            if served(spec, ctx.broker, ctx.session)
        ],
        "throttle_time": 0,
        "supported_features": [],
        "finalized_features_epoch": -1,
        "finalized_features": [],
    }


def unsupported_version_response(correlation_id: int, min_version: int, max_version: int) -> bytes:
    """An ApiVersions answer for a version we do not know: v0 layout, error 35, our ApiVersions range.

    Clients parse it as v0 and retry with a version in the range; the header is v0 as always.
    """
    body = struct.pack(">ihi" + "hhh", correlation_id, ErrorCode.unsupported_version, 1, 18, min_version, max_version)
    return struct.pack(">i", len(body)) + body
