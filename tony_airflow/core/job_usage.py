"""What a job cost: YARN's aggregate resource-seconds and each task's peak memory, in one record.

The RM counts memory (MB x s), vcores (x s) and GPUs (`yarn.io/gpu` x s) over
every container of the application, the AM included; the history adds each
task's peak resident memory as its executor sampled it. Every front end shows
the same record: the operator's `usage` XCom, `tony history show`, the job page.
"""

from __future__ import annotations

from typing import Any

from tony_airflow.yarn.rest import ApplicationReport

GPU = "yarn.io/gpu"


def job_usage(report: ApplicationReport, tasks_peak_rss_kib: dict[str, int] | None = None) -> dict[str, Any]:
    """The usage record of an application (best read once it has ended: the RM's sums are final then)."""
    seconds = dict(report.resource_seconds)
    return {
        "application_id": report.id,
        "memory_mb_seconds": seconds.get("memory-mb", 0),
        "vcore_seconds": seconds.get("vcores", 0),
        "gpu_seconds": seconds.get(GPU, 0),
        "elapsed_s": round(report.elapsed_ms / 1000.0, 1),
        "peak_memory_mib": {task: round(kib / 1024.0, 1) for task, kib in sorted((tasks_peak_rss_kib or {}).items())},
    }


def peaks_of(history: Any) -> dict[str, int]:
    """Each task's highest peak RSS (KiB) over all attempts of a JobHistory."""
    peaks: dict[str, int] = {}
    for attempt in getattr(history, "attempts", []):
        for run in attempt.tasks.values():
            peaks[run.task] = max(peaks.get(run.task, 0), run.peak_rss_kib)
    return peaks


def usage_line(usage: dict[str, Any]) -> str:
    """One line: 'usage: 812 MB-h memory, 0.42 vcore-h, 0 GPU-h over 64.0 s; peak worker:0 310 MiB, ...'."""
    text = (f"usage: {usage['memory_mb_seconds'] / 3600:.1f} MB-h memory ({usage['memory_mb_seconds']} MB-s), "
            f"{usage['vcore_seconds']} vcore-s, {usage['gpu_seconds']} GPU-s over {usage['elapsed_s']} s")
    peaks = usage.get("peak_memory_mib") or {}
    if peaks:
        text += "; peak memory " + ", ".join(f"{t} {m:.0f} MiB" for t, m in peaks.items())
    return text
