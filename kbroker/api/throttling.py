"""Client quota enforcement on the request path: what Kafka's KafkaApis and RequestHandlerHelper do
with the quota managers (kbroker/quota/manager.py), for the requests the dispatch hands over when
some quota is configured (`ClientQuotas.active`; with none, the dispatch never comes here).

Per request, with the connection's principal name (`User:ANONYMOUS` without a session) and the
header's client id:
- every request but the exempt ones (below) records its handling time against
  `request_percentage` (the handler's running time, its awaits left out, as a percentage of a
  second: Kafka's request-handler thread time);
- Produce records the request's size against `producer_byte_rate` after the append (acks=0 does
  not count against the request quota, as in Kafka, but its bytes do);
- Fetch from a consumer (never a follower: replica_id >= 0 is exempt from every client quota) has
  `max_bytes` capped to what the quota window allows (getMaxValueInQuotaWindow), records the
  response's size against `consumer_byte_rate`, and when throttled answers an empty response
  (nothing read is sent, and its bytes are taken back, as Kafka's unrecordQuotaSensor) that keeps
  an incremental fetch session's id (Kafka's getThrottledResponse);
- CreateTopics, CreatePartitions and DeleteTopics spend `controller_mutation_rate` per partition
  (`mutation_quota`: strict from v6, v3 and v5, where an exhausted quota refuses a topic with
  THROTTLING_QUOTA_EXCEEDED; permissive before); the handler leaves its throttle in `ctx.throttle_ms`.

The answer carries the largest throttle time in `throttle_time_ms` (every response that has the
field), and the connection is muted for that long (KIP-219): `throttled(ms)`, the server's, stops
reading from the connection without holding the answer back. Kafka (2.0 and later) answers at once
and mutes the channel for every version; it no longer delays the answers of old versions.
"""

from __future__ import annotations

import types
from dataclasses import replace
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any, Callable

from kbroker.api.context import Deferred
from kbroker.errors import ErrorCode, KafkaError
from kbroker.quota.manager import UNBOUNDED_MUTATIONS
from kbroker.wire.protocol import response_class

if TYPE_CHECKING:
    from kbroker.api.context import RequestContext

PRODUCE_KEY, FETCH_KEY = 0, 1
ANONYMOUS_NAME = "ANONYMOUS"  # KafkaPrincipal.ANONYMOUS's name, for in-process callers
# never throttled: Kafka's cluster actions (sendResponseExemptThrottle) and the SASL exchange
# (Kafka's authenticator answers it before any request handler sees it)
EXEMPT = frozenset({
    4,   # LeaderAndIsr
    5,   # StopReplica
    6,   # UpdateMetadata
    7,   # ControlledShutdown
    17,  # SaslHandshake
    27,  # WriteTxnMarkers
    36,  # SaslAuthenticate
    56,  # AlterPartition
})
THROTTLED_MESSAGE = "The throttling quota has been exceeded."  # Errors.THROTTLING_QUOTA_EXCEEDED.message


class ThrottlingQuotaExceededError(KafkaError):
    code = ErrorCode.throttling_quota_exceeded

    def __init__(self, message: str = THROTTLED_MESSAGE) -> None:
        super().__init__(message)


def principal_name(ctx: "RequestContext") -> str:
    session = ctx.session
    return session.principal.name if session is not None else ANONYMOUS_NAME


def mutation_quota(ctx: "RequestContext", strict_since: int):
    """The request's controller mutation quota (ControllerMutationQuotaManager.newQuotaFor):
    `exceeded()` before a strict mutation, `record(partitions)` after it, its throttle time left
    in `ctx.throttle_ms` by `note_mutation_throttle`. Unbounded (no cost) with no such quota."""
    quotas = getattr(ctx.broker, "client_quotas", None)
    if quotas is None or not quotas.controller_mutation.enabled:
        return UNBOUNDED_MUTATIONS
    return quotas.controller_mutation.quota_for(principal_name(ctx), ctx.header.client_id or "",
                                                ctx.version >= strict_since)


def note_mutation_throttle(ctx: "RequestContext", quota) -> None:
    if quota is not UNBOUNDED_MUTATIONS:
        ctx.throttle_ms = max(ctx.throttle_ms, quota.throttle_ms())


@types.coroutine
def _timed(coro, spent: list[int]):
    """Run a handler coroutine, adding the nanoseconds it runs (not the time it waits) to spent[0]."""
    value, error = None, None
    while True:
        started = perf_counter_ns()
        try:
            yielded = coro.send(value) if error is None else coro.throw(error)
        except StopIteration as done:
            spent[0] += perf_counter_ns() - started
            return done.value
        except BaseException:
            spent[0] += perf_counter_ns() - started
            raise
        spent[0] += perf_counter_ns() - started
        try:
            value, error = (yield yielded), None
        except BaseException as exc:  # a cancellation or close: handed to the handler
            value, error = None, exc


def set_throttle(header, data: dict, ms: int) -> None:
    """Put the throttle time in a response dict under the name its schema gives it."""
    if "throttle_time_ms" in data:
        data["throttle_time_ms"] = ms
        return
    schema = getattr(response_class(header.api_key, header.api_version), "__schema_struct__", None)
    if schema is None:
        data["throttle_time"] = ms
    elif "throttle_time_ms" in schema.known:
        data["throttle_time_ms"] = ms


def _replica_id(request) -> int:
    state = getattr(request, "replica_state", None)  # Fetch v15+
    return state.replica_id if state is not None else getattr(request, "replica_id", -1)


def _size(response) -> int:
    if response is None:
        return 0
    if isinstance(response, (bytes, bytearray)):
        return len(response)
    return sum(len(c) if isinstance(c, (bytes, bytearray)) else c.size for c in response)


def is_follower_fetch(header, request) -> bool:
    return header.api_key == FETCH_KEY and _replica_id(request) >= 0


async def answer_with_quotas(spec, header, ctx: "RequestContext", request, frame_size: int, decode_ns: int,
                             throttled: Callable[[int], None] | None, answer, encode, on_done) -> Any:
    """The dispatch's answer for a request some quota may throttle: `answer`/`encode` are the
    dispatch's own steps, `on_done` its statistics; `decode_ns` the time the request took to decode."""
    quotas = ctx.broker.client_quotas
    user, client_id = principal_name(ctx), header.client_id or ""
    key = header.api_key
    fetch_quota = key == FETCH_KEY and quotas.fetch.enabled
    if fetch_quota:  # a consumer's fetch takes at most what the quota window allows
        cap = quotas.fetch.max_value_in_window(user, client_id)
        if cap < request.max_bytes:
            cap = max(int(cap), 1)
            request = replace(request, max_bytes=cap, min_bytes=min(request.min_bytes, cap))
    timed = (quotas.request.enabled and not (key == PRODUCE_KEY and request.acks == 0)
             and quotas.request.bounded(user, client_id))  # the handler is timed only for a request quota
    spent = [decode_ns]
    pending = spec.handler(ctx, request)
    data = await answer(spec, header, _timed(pending, spent) if timed else pending)
    now = quotas.clock()
    throttle = ctx.throttle_ms  # the controller mutation quota's, left by the handler
    if key == PRODUCE_KEY and quotas.produce.enabled:
        throttle = max(throttle, quotas.produce.record_and_throttle(user, client_id, frame_size, now))

    if isinstance(data, Deferred):  # acks=all in a cluster: throttled now, answered when replicated
        if timed:
            throttle = max(throttle, quotas.request.record_time_and_throttle(user, client_id, spent[0], now))
        if throttle > 0 and throttled is not None:
            throttled(throttle)

        async def complete():
            done = await answer(spec, header, data.complete())
            if throttle > 0 and done is not None:
                set_throttle(header, done, throttle)
            response = encode(header, done)
            on_done()
            return response
        return Deferred(complete)

    if key == FETCH_KEY and data is not None and "responses" in data:
        started = perf_counter_ns()
        response = encode(header, data)
        spent[0] += perf_counter_ns() - started
        size = _size(response)
        if fetch_quota:
            throttle = max(throttle, quotas.fetch.record_and_throttle(user, client_id, size, now))
        if timed:
            throttle = max(throttle, quotas.request.record_time_and_throttle(user, client_id, spent[0], now))
        if throttle > 0:  # nothing read is sent: an empty answer, its bytes taken back (Kafka's)
            if fetch_quota:
                quotas.fetch.unrecord(user, client_id, size, now)
            session = ctx.fetch_context.throttled_response(throttle) if ctx.fetch_context is not None else None
            response = encode(header, {"throttle_time": throttle,
                                       "error_code": session.error if session else ErrorCode.none,
                                       "session_id": session.session_id if session else 0, "responses": []})
    else:
        if timed:
            throttle = max(throttle, quotas.request.record_time_and_throttle(user, client_id, spent[0], now))
        if throttle > 0 and data is not None:
            set_throttle(header, data, throttle)
        response = encode(header, data)
    if throttle > 0 and throttled is not None:
        throttled(throttle)
    on_done()
    return response
