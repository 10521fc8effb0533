"""Job history as plain text for `tony history` and `tony history show`."""

from __future__ import annotations

from tony_airflow.core.history.model import JobHistory, when
from tony_airflow.core.history.render import duration, mib
from tony_airflow.core.job_usage import usage_line
from tony_airflow.core.presentation import training_line


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in [header, *rows]]
    return "\n".join(lines)


def jobs_table(jobs: list[JobHistory]) -> str:
    rows = []
    for job in jobs:
        status = job.status + (" (log incomplete)" if job.log_incomplete else "")
        rows.append([job.app_id, job.name, job.user, status, when(job.start), duration(job.duration_s()),
                     f"{len(job.attempts)}/{job.max_attempts}"])
    return _table(["APPLICATION", "NAME", "USER", "STATUS", "START (UTC)", "DURATION", "ATTEMPTS"], rows)


def job_report(job: JobHistory, with_events: bool = True) -> str:
    out = [f"{job.app_id}  {job.name}  {job.status}",
           f"user {job.user} · queue {job.queue} · submitted {when(job.start)} UTC · {duration(job.duration_s())} · "
           f"attempts {len(job.attempts)}/{job.max_attempts}"]
    if job.incomplete_reason:
        out.append(f"note: {job.incomplete_reason}")
    if job.diagnostics:
        out.append(f"diagnostics: {job.diagnostics}")
    out += job.am_lost
    out += job.tokens
    if job.usage:
        out.append(usage_line(job.usage))
    if job.training:  # the last TRAINING event; time left only while the job runs (the job page's rule)
        line = training_line({**job.training, "eta_s": job.training.get("eta_s") if job.running else None})
        out.append(f"training: {line} (reported by {job.training.get('task') or '?'})")
    for attempt in job.attempts:
        if attempt.ok is None:
            verdict = "running" if job.running else "killed" if job.status == "KILLED" else "did not end"
        else:
            verdict = "succeeded" if attempt.ok else "failed"
        first = ""
        if attempt.first_failure:
            run = attempt.failed_first()
            where = f" on {run.host}" if run and run.host else ""
            first = f"; first failure: {attempt.first_failure} exit code {attempt.first_failure_exit}{where}"
        elif attempt.ok is False and attempt.reason:
            first = f"; {attempt.reason}"
        uncounted = f" (not counted: {attempt.cause})" if attempt.ok is False and not attempt.counted else ""
        out += ["", f"attempt {attempt.number}: {verdict}{first}{uncounted}"]
        if attempt.lost_hosts:
            out.append(f"lost host(s): {'; '.join(attempt.lost_hosts)}")
        if attempt.preempted:
            out.append(f"preempted by YARN: {'; '.join(attempt.preempted)}")
        if attempt.replaced:
            out.append(f"workers replaced (elastic): {'; '.join(attempt.replaced)}")
        out += attempt.writer_moves  # elastic: the output's writer went with rank 0 to a survivor
        if attempt.gang:
            out.append(f"gang: {'; '.join(attempt.gang)}")
        rows = [[("* " if run.task == attempt.first_failure else "  ") + run.task, run.status,
                 f"{run.host}:{run.port}" if run.host else "", run.container_id,
                 "" if run.exit_code is None else str(run.exit_code), duration(run.duration_s), mib(run.peak_rss_kib)]
                for run in attempt.tasks.values()]
        out.append(_table(["  TASK", "STATUS", "ADDRESS", "CONTAINER", "EXIT", "DURATION", "PEAK RSS"], rows))
    if with_events:
        out += ["", "events:"]
        for e in job.events:
            details = " ".join(f"{k}={v}" for k, v in e.items()
                               if k not in ("time", "event", "attempt", "task", "stderr_tail", "spec")
                               and v not in (None, "", [], {}))
            who = " ".join(str(x) for x in (f"attempt {e['attempt']}" if "attempt" in e else "", e.get("task", ""))
                           if x)
            out.append(f"  {when(e['time'])}  {e['event']:<16} {who:<20} {details}".rstrip())
    return "\n".join(out)
