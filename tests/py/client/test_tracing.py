"""OpenTelemetry: Client.enqueue carries the producer's trace context in the job's headers,
and the worker runs each job in a consumer span linked to it (SDK's in-memory exporter)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import pgq
from support.workers import outcome_count, wait_until

EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module")
def tracer() -> trace.Tracer:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(provider)
    return trace.get_tracer("test")


@pytest.fixture
def seen() -> Iterator[dict[int, trace.SpanContext]]:
    EXPORTER.clear()
    yield {}


def run_worker(worker: pgq.Worker) -> threading.Thread:
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    return thread


def test_a_job_runs_in_a_consumer_span_linked_to_its_producer(
    dsn: str, tracer: trace.Tracer, seen: dict[int, trace.SpanContext]
) -> None:
    worker = pgq.Worker(dsn, concurrency=2, poll_interval=0.1)

    @worker.entrypoint("traced")
    async def traced(job: pgq.Job) -> None:
        seen[job.id] = trace.get_current_span().get_span_context()

    @worker.entrypoint("traced_sync")
    def traced_sync(job: pgq.Job) -> None:
        seen[job.id] = trace.get_current_span().get_span_context()
        raise ValueError("boom")

    with pgq.Client(dsn) as client:
        with tracer.start_as_current_span("produce") as producer:
            job_id = client.enqueue("traced", {"n": 1})
            failing = client.enqueue("traced_sync", {"n": 2}, max_attempts=1)
        untraced = client.enqueue("traced", {"n": 3})
        headers = client.job(job_id)["headers"]
    assert headers["traceparent"].split("-")[1] == format(producer.get_span_context().trace_id, "032x")

    thread = run_worker(worker)
    try:
        wait_until(lambda: outcome_count(dsn) == 2 and outcome_count(dsn, "failed") == 1, 30, "the jobs")
    finally:
        worker.stop()
        thread.join(timeout=30)

    spans = {
        int(s.attributes["messaging.message.id"]): s
        for s in EXPORTER.get_finished_spans()
        if s.kind is SpanKind.CONSUMER
    }
    span = spans[job_id]
    assert span.name == "traced process" and span.kind is SpanKind.CONSUMER
    assert [link.context.span_id for link in span.links] == [producer.get_span_context().span_id]
    assert span.attributes["messaging.destination.name"] == "traced"
    assert (span.attributes["pgq.job.attempt"], span.attributes["pgq.job.deliveries"]) == (1, 1)
    assert seen[job_id].span_id == span.context.span_id, "the handler runs inside the span"

    failed = spans[failing]
    assert seen[failing].span_id == failed.context.span_id, "a sync handler's thread is in the span too"
    assert failed.status.status_code is StatusCode.ERROR
    assert [e.name for e in failed.events] == ["exception"]
    assert spans[untraced].links == (), "no producer span, no link"
