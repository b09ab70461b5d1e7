"""The server's Prometheus metrics, in a registry of its own (one per app: two apps in one process, as in
the tests, count apart). ``GET /metrics`` serves :meth:`Metrics.exposition`."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from protoembed.serving.batcher import BatchStats

#: Bucket bounds of the batch-size histograms (rows, requests; tokens are these x 64).
_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)


class Metrics:
    """The counters, gauge and histograms of one app (names start with ``protoembed_``):

    - ``requests_total{endpoint,status}`` and ``request_errors_total{endpoint,status}`` (status >= 400);
    - ``request_latency_seconds{endpoint}``: from the request read to the response (histogram);
    - ``requests_in_flight``: embedding requests being answered, ``queue_rows``: rows waiting for a batch
      (gauges, read at scrape time);
    - ``batch_rows``, ``batch_requests`` (how many requests' rows one batch held), ``batch_tokens`` and
      ``batch_padded_tokens``, ``batch_seconds``: per forward pass (histograms);
    - ``tokens_total`` and ``inputs_total``: what the model encoded (its rate is the tokens per second).
    """

    content_type = CONTENT_TYPE_LATEST

    def __init__(self, queue_depth: Callable[[], int], in_flight: Callable[[], int]) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "protoembed_requests", "HTTP requests by endpoint and status", ["endpoint", "status"], registry=r
        )
        self.errors = Counter(
            "protoembed_request_errors",
            "HTTP requests answered with an error (status >= 400)",
            ["endpoint", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "protoembed_request_latency_seconds", "Request latency", ["endpoint"], registry=r
        )
        self.queue = Gauge("protoembed_queue_rows", "Input rows queued for a batch", registry=r)
        self.queue.set_function(lambda: float(queue_depth()))
        self.in_flight = Gauge(
            "protoembed_requests_in_flight", "Embedding requests being answered", registry=r
        )
        self.in_flight.set_function(lambda: float(in_flight()))
        self.batch_rows = Histogram(
            "protoembed_batch_rows", "Input rows per forward pass", buckets=_SIZES, registry=r
        )
        self.batch_requests = Histogram(
            "protoembed_batch_requests",
            "Requests whose rows shared a forward pass",
            buckets=_SIZES,
            registry=r,
        )
        tokens = tuple(64 * n for n in _SIZES)
        self.batch_tokens = Histogram(
            "protoembed_batch_tokens", "Tokens per forward pass (no padding)", buckets=tokens, registry=r
        )
        self.batch_padded = Histogram(
            "protoembed_batch_padded_tokens",
            "Padded tokens per forward pass (longest x rows)",
            buckets=tokens,
            registry=r,
        )
        self.batch_seconds = Histogram("protoembed_batch_seconds", "Seconds per forward pass", registry=r)
        self.tokens = Counter("protoembed_tokens", "Tokens encoded (after truncation)", registry=r)
        self.inputs = Counter("protoembed_inputs", "Inputs encoded", registry=r)

    def observe_batch(self, stats: BatchStats) -> None:
        """Record one forward pass (the batcher's ``observe``)."""
        self.batch_rows.observe(stats.rows)
        self.batch_requests.observe(stats.requests)
        self.batch_tokens.observe(stats.tokens)
        self.batch_padded.observe(stats.padded_tokens)
        self.batch_seconds.observe(stats.seconds)
        self.tokens.inc(stats.tokens)
        self.inputs.inc(stats.rows)

    def observe_request(self, endpoint: str, status: int, seconds: float) -> None:
        """Record one answered request."""
        self.requests.labels(endpoint, str(status)).inc()
        if status >= 400:
            self.errors.labels(endpoint, str(status)).inc()
        self.latency.labels(endpoint).observe(seconds)

    def exposition(self) -> bytes:
        """The Prometheus text format of every metric."""
        return generate_latest(self.registry)
