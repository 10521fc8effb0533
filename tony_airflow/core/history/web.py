"""`tony history serve`: the history web UI (this project's TonY Portal), aiohttp.

Pages: the jobs list, a job page (the same template as the AM's live status
page), the raw events and spec, and a task's container logs read through
`yarn logs`. Finished histories older than `max_age_s` are purged at start
and then every `purge_interval_s`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiohttp import web

from tony_airflow.core.history import reader
from tony_airflow.core.history.model import JobHistory, TaskRun
from tony_airflow.core.history.render import Links, render_job, render_jobs
from tony_airflow.core.history.store import HistoryStore
from tony_airflow.yarn import logs
from tony_airflow.yarn.rest import is_application_id

log = logging.getLogger("tony.history.web")


def _links(job: JobHistory, rm_url: str | None, tracking_url: str | None) -> Links:
    def log_url(run: TaskRun) -> str | None:
        return f"/jobs/{job.app_id}/logs/{run.task}?attempt={run.attempt}" if run.container_id else None

    tensorboard = None
    if job.running and tracking_url and job.spec and "tensorboard" in (job.spec.get("tasks") or {}):
        tensorboard = tracking_url.rstrip("/") + "/pages/tensorboard/"
    return Links(jobs="/", job=lambda a: f"/jobs/{a}", log=log_url,
                 application=f"{rm_url.rstrip('/')}/cluster/app/{job.app_id}" if rm_url else None,
                 tensorboard=tensorboard, events_json=f"/jobs/{job.app_id}/events.jsonl",
                 spec_json=f"/jobs/{job.app_id}/job.json")


def build_app(store: HistoryStore, rm: Any = None, max_age_s: float | None = None,
              purge_interval_s: float = 3600.0) -> web.Application:
    cache = reader.JobCache(store, rm)
    rm_url = rm.addresses[0] if rm is not None and getattr(rm, "addresses", None) else None

    def app_id_of(request: web.Request) -> str:
        app_id = request.match_info["app_id"]
        if not is_application_id(app_id):
            raise web.HTTPBadRequest(text=f"application_id: {app_id!r} is malformed")
        return app_id

    async def job_or_404(app_id: str) -> JobHistory:
        job = await asyncio.to_thread(reader.load_by_id, store, app_id, rm)
        if job is None:
            raise web.HTTPNotFound(text=f"no history for {app_id} in {store.root}")
        return job

    async def jobs_page(request: web.Request) -> web.Response:
        jobs = await asyncio.to_thread(cache.jobs)
        return web.Response(text=render_jobs(jobs, Links(job=lambda a: f"/jobs/{a}")), content_type="text/html")

    async def jobs_json(request: web.Request) -> web.Response:
        jobs = await asyncio.to_thread(cache.jobs)
        return web.json_response([j.summary() for j in jobs])

    async def job_page(request: web.Request) -> web.Response:
        job = await job_or_404(app_id_of(request))
        tracking = None
        if job.running and rm is not None:
            try:
                tracking = (await asyncio.to_thread(rm.application, job.app_id)).tracking_url
            except Exception:
                tracking = None
        return web.Response(text=render_job(job, _links(job, rm_url, tracking)), content_type="text/html")

    async def raw(request: web.Request) -> web.Response:
        app_id = app_id_of(request)
        files = await asyncio.to_thread(store.find, app_id)
        if files is None:
            raise web.HTTPNotFound(text=f"no history for {app_id}")
        name = request.match_info["name"]
        path = files.events_path if name == "events.jsonl" else store.path(app_id, "job.json")
        data = await asyncio.to_thread(store.fs.cat_file, path)
        kind = "application/x-ndjson" if name == "events.jsonl" else "application/json"
        return web.Response(body=data, content_type=kind)

    async def task_logs(request: web.Request) -> web.Response:
        job = await job_or_404(app_id_of(request))
        task = request.match_info["task"]
        attempt = request.query.get("attempt")
        runs = [r for r in job.runs_of(task) if r.container_id and (not attempt or str(r.attempt) == attempt)]
        if not runs:
            raise web.HTTPNotFound(text=f"{job.app_id} has no container for {task}")
        parts = []
        for run in runs:
            _, text = await asyncio.to_thread(logs.read_logs, job.app_id, run.container_id, logs.TASK_LOG_PATTERN)
            parts.append(f"==> {run.banner()} <==\n{text}")
        return web.Response(text="\n".join(parts), content_type="text/plain")

    async def purge_forever(app: web.Application):
        async def loop(max_age_s: float) -> None:
            while True:
                try:
                    purged = await asyncio.to_thread(store.purge, max_age_s)
                    if purged:
                        log.info("purged the history of %d job(s): %s", len(purged), ", ".join(purged))
                except Exception as exc:
                    log.warning("purge failed: %s", exc)
                await asyncio.sleep(purge_interval_s)

        task = asyncio.create_task(loop(max_age_s)) if max_age_s else None
        yield
        if task is not None:
            task.cancel()

    app = web.Application()
    app.router.add_get("/", jobs_page)
    app.router.add_get("/api/jobs", jobs_json)
    app.router.add_get("/jobs/{app_id}", job_page)
    app.router.add_get("/jobs/{app_id}/logs/{task}", task_logs)
    app.router.add_get("/jobs/{app_id}/{name:events.jsonl|job.json}", raw)
    app.cleanup_ctx.append(purge_forever)
    return app


async def serve(app: web.Application, host: str, port: int, ready=print) -> None:
    """Serve until cancelled; `ready` is told the URL once the port is bound."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    ready(f"http://{host}:{bound}/")
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
