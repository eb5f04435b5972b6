"""Logging for `pgq worker`: the library configures none; the command sets level and format."""

from __future__ import annotations

import json
import logging

# Fields the worker attaches to its per-job lines (pgq.worker._log_outcome).
JOB_FIELDS = ("job_id", "entrypoint", "attempt", "deliveries", "duration", "outcome")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and the job's fields."""

    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        doc.update({name: getattr(record, name) for name in JOB_FIELDS if hasattr(record, name)})
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str)


def configure(level: str, fmt: str) -> None:
    """Send every log record to stderr at `level`, as text or JSON lines."""
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("pgq").setLevel(level.upper())
