"""`pgq bench` output: the aligned results table; the project's targets go to results.json."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _get(tree: dict[str, Any], *path: str) -> Any:
    node: Any = tree
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def _ratio(a: Any, b: Any) -> float | None:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b:
        return round(a / b, 3)
    return None


def _rate(value: Any, unit: str = "jobs/s") -> str:
    return f"{value:,.0f} {unit}" if isinstance(value, (int, float)) else "-"


def _x(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def _size(n: int) -> str:
    return (
        f"{n // 1_000_000}M"
        if n >= 1_000_000 and n % 1_000_000 == 0
        else (f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n))
    )


def targets(s: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target the project set, with the measured value and whether it is met."""
    drain = _get(s, "drain", "jobs_per_s")
    out: list[dict[str, Any]] = []

    def add(name: str, value: float | None, ok: bool | None, shown: str) -> None:
        out.append(
            {"target": name, "value": value, "met": ok, "shown": shown if value is not None else "n/a"}
        )

    r = _ratio(drain, _get(s, "peer", "drain", "jobs_per_s"))
    add("drain >= 2x PgQueuer", r, r is not None and r >= 2, _x(r))
    r = _ratio(_get(s, "defaults", "jobs_per_s"), drain)
    add("`pgq worker` defaults >= 0.8x the tuned drain", r, r is not None and r >= 0.8, _x(r))
    worker_us = _get(s, "drain", "cpu", "clients_us_per_job")
    add(
        "worker CPU per job <= 10 us", worker_us, worker_us is not None and worker_us <= 10, f"{worker_us} us"
    )
    r = _ratio(_get(s, "drain", "cpu", "postgres_us_per_job"), _get(s, "raw", "cpu", "postgres_us_per_job"))
    add("PostgreSQL CPU per job <= 1.15x the raw cycle's", r, r is not None and r <= 1.15, _x(r))
    r = _ratio(drain, _get(s, "raw", "rows_per_s"))
    add("drain >= 60% of the raw limit", r, r is not None and r >= 0.6, f"{(r or 0) * 100:.0f}%")
    for conns in ("1conn", "8conn"):
        r = _ratio(
            _get(s, "enqueue", f"client_single_{conns}"), _get(s, "peer", "enqueue", f"client_single_{conns}")
        )
        add(f"single enqueue ({conns}) >= PgQueuer", r, r is not None and r >= 1, _x(r))
    r = _ratio(
        _get(s, "enqueue", "client_batch1000_1conn"), _get(s, "peer", "enqueue", "client_batch1000_1conn")
    )
    add("batch enqueue >= 1.5x PgQueuer", r, r is not None and r >= 1.5, _x(r))
    p50, p99 = _get(s, "latency", "p50_ms"), _get(s, "latency", "p99_ms")
    add("latency p50 < 5 ms", p50, p50 is not None and p50 < 5, f"{p50} ms")
    add("latency p99 < 50 ms", p99, p99 is not None and p99 < 50, f"{p99} ms")
    runs = _get(s, "backlog", "runs") or {}
    if runs:
        largest = max(runs, key=int)
        r = runs[largest].get("ratio_to_smallest")
        add(
            f"{_size(int(largest))} backlog drain >= 90% of the smallest",
            r,
            r is not None and r >= 0.9,
            f"{(r or 0) * 100:.0f}%",
        )
    for size, iso in (_get(s, "backlog", "isolated") or {}).items():
        r = iso.get("median_ratio_to_smallest")
        add(
            f"{_size(int(size))} backlog drain, its own partition, >= 90% of the smallest (medians)",
            r,
            r is not None and r >= 0.9,
            f"{(r or 0) * 100:.0f}%",
        )
    r = _ratio(_get(s, "xmin", "jobs_per_s"), drain)
    add("held-xmin drain >= 90% of clean", r, r is not None and r >= 0.9, f"{(r or 0) * 100:.0f}%")
    large = s.get("xmin_large") or {}
    # Against the clean drain of as many jobs; not evaluated when that did not run.
    r = _ratio(large.get("jobs_per_s"), _get(s, "drain_large", "jobs_per_s"))
    if r is not None:
        add(
            f"held-xmin drain of {_size(large['jobs'])} >= 90% of clean",
            r,
            r >= 0.9,
            f"{r * 100:.0f}%",
        )
    for eps, read in (_get(s, "queues", "runs") or {}).items():
        ms = read.get("ms")
        add(
            f"pgq.queues at {_size(read.get('queued', 0))} queued ({eps} entrypoints) < 10 ms",
            ms,
            ms is not None and ms < 10,
            f"{ms} ms",
        )
    monitor = s.get("monitor") or {}
    for case in ("jobs_deepest_page_keyset", "search_no_match_bounded"):
        ms = (monitor.get(case) or {}).get("median_ms")
        if ms is not None:
            add(
                f"{case.replace('_', ' ')} at {_size(monitor['queued'])} queued < 1 s",
                ms,
                ms < 1000,
                f"{ms} ms",
            )
    return out


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        cells = [
            c.ljust(w) if i == 0 or i == len(row) - 1 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def render(results: dict[str, Any]) -> str:
    s = results["scenarios"]
    p = results["parameters"]
    pg = results["machine"]["postgres"]
    peer_version = _get(s, "peer", "version")
    lines = [
        f"PostgreSQL {pg['server_version']}: fsync={pg['fsync']},"
        f" synchronous_commit={pg['synchronous_commit']},"
        f" shared_buffers={pg['shared_buffers']}; {results['machine']['cores']} cores",
        f"N={p['jobs']:,} jobs, W={p['workers']} worker processes x concurrency {p['concurrency']},"
        f" batch size {p['batch_size']}"
        + (f" ({p['batch_from']})" if p.get("batch_from") not in (None, "--batch-size") else "")
        + f"; timed runs {p['seconds']} s; best of {p.get('repeat', 1)} runs;"
        f" latency at {p['latency_rate']:.0f} jobs/s"
        + (f"; PgQueuer {peer_version}" if peer_version else ""),
        "",
    ]
    rows = [["scenario", "pgq", "PgQueuer", "pgq/PgQueuer", "note"]]
    raw = _get(s, "raw", "rows_per_s")
    drain = _get(s, "drain", "jobs_per_s")
    rows.append(
        [
            f"raw limit: claim+complete as plain SQL (pgbench, {_get(s, 'raw', 'clients') or 2} clients)",
            _rate(raw, "rows/s"),
            "",
            "",
            f"the ceiling; batch {_get(s, 'raw', 'batch_size') or '-'}",
        ]
    )
    sql_rate = _get(s, "sql", "jobs_per_s")
    rows.append(
        [
            "the same cycle through pgq.claim/pgq.complete (pgbench, no worker)",
            _rate(sql_rate),
            "",
            "",
            f"{_x(_ratio(sql_rate, raw))} of the raw limit",
        ]
    )
    spread_rate = _get(s, "spread", "jobs_per_s")
    spread_eps = _get(s, "spread", "entrypoints") or "several"
    rows.append(
        [
            f"the same, each client a worker of {spread_eps} entrypoints",
            _rate(spread_rate),
            "",
            "",
            f"{_x(_ratio(spread_rate, sql_rate))} of one entrypoint's",
        ]
    )
    pd = _get(s, "peer", "drain") or {}
    peer_cfg = (
        f"; PgQueuer best of {len(pd.get('trials', []))}: {pd['processes']} proc x {pd['managers']} managers,"
        f" batch {pd['batch_size']}"
        if pd.get("processes")
        else ""
    )
    rows.append(
        [
            f"drain {_size(p['jobs'])} no-op jobs",
            _rate(drain),
            _rate(pd.get("jobs_per_s")),
            _x(_ratio(drain, pd.get("jobs_per_s"))),
            f"pgq/raw {_x(_ratio(drain, raw))}{peer_cfg}",
        ]
    )
    defaults = _get(s, "defaults", "jobs_per_s")
    rows.append(
        [
            f"drain {_size(p['jobs'])}, `pgq worker` without flags",
            _rate(defaults),
            "",
            "",
            f"{_x(_ratio(defaults, drain))} of the tuned drain",
        ]
    )
    keyed = _get(s, "keyed", "jobs_per_s")
    rows.append(
        [
            f"drain {_size(_get(s, 'keyed', 'jobs') or 0)} jobs of 100 concurrency keys (fair claims)",
            _rate(keyed),
            "",
            "",
            f"{_x(_ratio(keyed, drain))} of the drain without keys",
        ]
    )
    by = _get(s, "bystander", "bystander") or {}

    def lat(d: Any) -> str:
        return f"{d['p50_ms']:.1f} / {d['p99_ms']:.1f} ms" if isinstance(d, dict) and "p50_ms" in d else "-"

    rows.append(
        [
            "bystander UPDATE on its own table, p50 / p99, while a drain runs",
            lat(by.get("drain")),
            "",
            "",
            f"{lat(by.get('idle'))} with the queue idle; {by.get('rate', 0):.0f}/s, 1 connection",
        ]
    )
    for key, label in [
        ("single_1conn", "enqueue, 1 job/transaction, 1 connection"),
        ("single_8conn", "enqueue, 1 job/transaction, 8 connections"),
        ("batch1000_1conn", "enqueue_batch, 1000 jobs/statement, 1 connection"),
    ]:
        mine, theirs = _get(s, "enqueue", f"client_{key}"), _get(s, "peer", "enqueue", f"client_{key}")
        rows.append(
            [
                label + " (Python client)",
                _rate(mine),
                _rate(theirs),
                _x(_ratio(mine, theirs)),
                f"pgq via pgbench: {_rate(_get(s, 'enqueue', f'pgbench_{key}'))}",
            ]
        )
    lat, plat = s.get("latency") or {}, _get(s, "peer", "latency") or {}

    def ms(d: dict[str, Any]) -> str:
        return f"{d['p50_ms']:.1f} / {d['p99_ms']:.1f} ms" if "p50_ms" in d else "-"

    rows.append(
        [
            "latency commit -> handler start, p50 / p99",
            ms(lat),
            ms(plat),
            "",
            f"{lat.get('samples', 0)} jobs, 1 idle worker; max {lat.get('max_ms', '-')} ms",
        ]
    )
    runs = _get(s, "backlog", "runs") or {}
    sample = _get(s, "backlog", "sample") or 0
    backlogs = [(size, r, "") for size, r in sorted(runs.items(), key=lambda kv: int(kv[0]))]
    backlogs += [
        (size, r, ", its own partition") for size, r in (_get(s, "backlog", "isolated") or {}).items()
    ]
    for size, r, where in backlogs:
        if "jobs_per_s" not in r:
            continue
        n = len(r.get("runs", []))
        medians = f" (medians of {n}: {_x(r.get('median_ratio_to_smallest'))})" if n > 1 else ""
        rows.append(
            [
                f"drain {_size(sample)} of {_size(int(size))} queued ({r['entrypoints']} entrypoints{where})",
                _rate(r["jobs_per_s"]),
                "",
                "",
                f"{_x(r['ratio_to_smallest'])} of the {_size(sample)} rate{medians}",
            ]
        )
    xmin = _get(s, "xmin", "jobs_per_s")
    rows.append(
        [
            f"drain {_size(p['jobs'])} with a REPEATABLE READ snapshot held",
            _rate(xmin),
            "",
            "",
            f"{_x(_ratio(xmin, drain))} of the clean drain",
        ]
    )
    large = s.get("xmin_large") or {}
    if "jobs_per_s" in large:
        clean = _get(s, "drain_large", "jobs_per_s")
        versus = f"{_x(_ratio(large['jobs_per_s'], drain))} of the clean drain ({_size(p['jobs'])})"
        if clean is not None:
            versus = (
                f"{_x(_ratio(large['jobs_per_s'], clean))} of the clean drain of {_size(large['jobs'])}"
                f" ({_rate(clean)}); {versus}"
            )
        rows.append(
            [
                f"drain {_size(large['jobs'])} with a REPEATABLE READ snapshot held",
                _rate(large["jobs_per_s"]),
                "",
                "",
                versus,
            ]
        )
    for eps, read in sorted((_get(s, "queues", "runs") or {}).items(), key=lambda kv: int(kv[0])):
        if "ms" not in read:
            continue
        fresh, vacuumed = read["fresh"], read["vacuumed"]
        rows.append(
            [
                f"pgq.queues at {_size(read['queued'])} queued ({eps} entrypoint{'s' if eps != '1' else ''})",
                f"{read['ms']:.1f} ms",
                "",
                "",
                f"median of {read['reads']} reads: {fresh['median_ms']:.1f} ms after the fill,"
                f" {vacuumed['median_ms']:.1f} ms after VACUUM; {vacuumed['approximate_rows']} of"
                f" {vacuumed['rows']} rows approximate",
            ]
        )
    monitor = s.get("monitor") or {}
    for case, read in monitor.items():
        if isinstance(read, dict) and "median_ms" in read:
            rows.append(
                [
                    f"dashboard at {_size(monitor['queued'])} queued: {case.replace('_', ' ')}",
                    f"{read['median_ms']:.1f} ms",
                    "",
                    "",
                    f"median of {monitor['reads']} reads, worst {read['max_ms']:.1f} ms",
                ]
            )
    lines += _table(rows)
    cpu_rows = [["per job", "CPU, client processes", "CPU, PostgreSQL backends", "WAL", "other load"]]
    for label, node in [
        ("raw limit (pgbench)", s.get("raw")),
        ("pgq SQL cycle (pgbench)", s.get("sql")),
        (f"pgq SQL cycle, workers of {spread_eps} entrypoints", s.get("spread")),
        ("pgq drain (workers)", s.get("drain")),
        ("pgq drain, defaults", s.get("defaults")),
        ("pgq drain, 100 keys", s.get("keyed")),
        ("PgQueuer drain (workers)", _get(s, "peer", "drain")),
        ("pgq drain, held xmin", s.get("xmin")),
        ("pgq drain, held xmin, large", s.get("xmin_large")),
        ("pgq drain, large", s.get("drain_large")),
        ("pgq at the latency run's trickle", s.get("latency")),
        ("PgQueuer at the same trickle", _get(s, "peer", "latency")),
        *(
            (f"pgq drain, {_size(_get(s, 'backlog', 'sample') or 0)} of {_size(int(size))} queued", r)
            for size, r in sorted((_get(s, "backlog", "runs") or {}).items(), key=lambda kv: int(kv[0]))
        ),
        *(
            (f"pgq drain, {_size(_get(s, 'backlog', 'sample') or 0)} of {_size(int(size))}, own partition", r)
            for size, r in (_get(s, "backlog", "isolated") or {}).items()
        ),
    ]:
        cpu = (node or {}).get("cpu") if isinstance(node, dict) else None
        if cpu:
            cpu_rows.append(
                [
                    label,
                    f"{cpu['clients_us_per_job']:.1f} us" if "clients_us_per_job" in cpu else "-",
                    f"{cpu['postgres_us_per_job']:.1f} us" if "postgres_us_per_job" in cpu else "-",
                    f"{cpu['wal_bytes_per_job']:,} B" if "wal_bytes_per_job" in cpu else "-",
                    f"{cpu['others_cores']:.2f} cores" if "others_cores" in cpu else "-",
                ]
            )
    if len(cpu_rows) > 1:
        lines += ["", *_table(cpu_rows)]
    problems = [f"{name}: {v['error']}" for name, v in s.items() if isinstance(v, dict) and "error" in v]
    skipped = [f"{name}: {v['skipped']}" for name, v in s.items() if isinstance(v, dict) and "skipped" in v]
    if skipped:
        lines += ["", "skipped: " + "; ".join(skipped)]
    if problems:
        lines += ["", "errors:"] + [f"  {p}" for p in problems]
    # The project's own performance targets stay in results.json ("targets"), not here.
    return "\n".join(lines)
