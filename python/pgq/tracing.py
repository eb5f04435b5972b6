"""OpenTelemetry, when it is installed (`pip install 'pgq-sql[otel]'`); without it, nothing.

A producer's enqueue carries the W3C trace context of its current span in the job's headers
(`traceparent`, `tracestate`; a SQL producer may set them itself), and the worker runs each
job in a CONSUMER span linked to that context, so a trace shows where a job came from
without making one trace of every job's whole lifetime.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

try:
    from opentelemetry import propagate, trace
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError:  # the extra is not installed
    trace = None

from .job import Job

TRACER = "pgq"


def inject(headers: dict[str, Any] | None) -> dict[str, Any] | None:
    """The headers, plus the current span's trace context when there is one."""
    if trace is None or not trace.get_current_span().get_span_context().is_valid:
        return headers
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return {**carrier, **(headers or {})} if carrier else headers


def enabled() -> bool:
    """True when spans would go somewhere: the extra is installed and the application set a
    tracer provider. Without one every span is a no-op, and opening it per job would still
    cost about as much as the worker's whole handling of a no-op job."""
    if trace is None:
        return False
    return not isinstance(trace.get_tracer_provider(), (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


@contextlib.contextmanager
def job_span(job: Job) -> Iterator[Any]:
    """Run the block in a consumer span for this delivery of the job (a no-op without the
    extra). Exceptions are recorded on the span and raised again."""
    if trace is None:
        yield None
        return
    headers = job.headers if isinstance(job.headers, dict) else {}
    producer = trace.get_current_span(propagate.extract({k: str(v) for k, v in headers.items()}))
    context = producer.get_span_context()
    links = [trace.Link(context)] if context.is_valid else []
    tracer = trace.get_tracer(TRACER)
    with tracer.start_as_current_span(
        f"{job.entrypoint} process",
        kind=SpanKind.CONSUMER,
        links=links,
        attributes={
            "messaging.system": "pgq",
            "messaging.operation": "process",
            "messaging.destination.name": job.entrypoint,
            "messaging.message.id": str(job.id),
            "pgq.job.attempt": job.attempt,
            "pgq.job.deliveries": job.deliveries,
        },
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield span
        except BaseException as exc:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
