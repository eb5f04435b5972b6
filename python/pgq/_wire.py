"""How the worker reads its claims: the cheapest decoding that gives the same values.

A claim returns a row per job, and decoding them is a large share of a fast job's cost in
the worker: the claim is read in binary format (integers and timestamps arrive as numbers,
not text to parse), and jsonb through JsonbLoader below.
"""

from __future__ import annotations

import json
from typing import Any

from psycopg.adapt import Buffer, Loader
from psycopg.errors import DataError
from psycopg.pq import Format

_decoder = json.JSONDecoder()
_decode = _decoder.decode
# The scanner under decode, without its two whitespace matches (half of a small payload's
# cost): PostgreSQL's jsonb text has no whitespace around its value.
_scan = _decoder.scan_once


class JsonbLoader(Loader):
    """jsonb in binary format: a version byte, then the JSON text in the client encoding
    (UTF-8: the worker's connections set it). Decoded as str: psycopg's loader hands
    json.loads bytes, which first detects their encoding (about twice the cost for a small
    payload). The values are json.loads's."""

    format = Format.BINARY

    def load(self, data: Buffer) -> Any:
        if data[0] != 1:
            raise DataError(f"unknown jsonb binary format: {data[0]}")
        try:
            # Not UTF-8 (a SQL_ASCII database keeps any bytes): UnicodeDecodeError, a ValueError.
            text = str(data[1:], "utf-8")
            try:
                value, end = _scan(text, 0)
                if end == len(text):
                    return value
            except (StopIteration, ValueError, RecursionError):
                pass
            return _decode(text)  # what the scanner did not take whole: decode's value or error
        except (ValueError, RecursionError) as exc:
            # jsonb that Python will not decode (an integer of over 4300 digits, nesting
            # deeper than the recursion limit): raised here, it would fail the whole claim,
            # and the worker with it, on every delivery of the job.
            return Undecodable(f"{type(exc).__name__}: {exc}")


class Undecodable:
    """A claimed job's payload or headers that Python could not decode: the worker fails
    that job (pgq.fail) instead of running its handler."""

    __slots__ = ("error",)

    def __init__(self, error: str) -> None:
        self.error = error
