"""A fake ResourceManager REST API for unit tests of the Airflow provider (never used end to end).

Each application steps through a scripted list of (state, finalStatus) on
every GET of it (or of the list of active applications that holds it); a PUT to
/state kills it. `/proxy/<id>/pages/tony/output.json` answers from a script of
output pieces, `/proxy/<id>/pages/tony/progress.json` steps through a script of the AM's progress records.
Requests are counted so tests can bound them.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


@dataclass
class FakeApp:
    states: list[tuple[str, str]]
    diagnostics: str = ""
    tags: str = ""
    gets: int = 0
    killed_by: str | None = None

    def current(self) -> tuple[str, str]:
        return self.states[min(self.gets, len(self.states) - 1)]


@dataclass
class FakeResourceManager:
    apps: dict[str, FakeApp] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)
    fail_with: int | None = None  # answer every request with this HTTP status
    standby_requests: int = 0  # answer this many next requests as a standby RM that knows no active one
    outputs: dict[str, str] = field(default_factory=dict)  # app id -> the chief's whole output so far
    progress: dict[str, list[dict]] = field(default_factory=dict)  # app id -> the AM's progress, one per GET

    def start(self) -> FakeResourceManager:
        rm = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _app(self):
                rm.requests.append((self.command, self.path))
                if rm.fail_with:
                    self._send(rm.fail_with, {"RemoteException": {"message": "fake RM failure"}})
                    return None, None
                app_id = self.path.split("?")[0].split("/")[5]
                app = rm.apps.get(app_id)
                if app is None:
                    self._send(404, {"RemoteException": {"message": f"app with id: {app_id} not found"}})
                return app_id, app

            def _report(self, app_id: str, app: FakeApp) -> dict:
                state, final = app.current()
                app.gets += 1
                return {"id": app_id, "state": state, "finalStatus": final,
                        "diagnostics": app.diagnostics if state != "RUNNING" else "",
                        "trackingUrl": f"{rm.url}/proxy/{app_id}/", "applicationTags": app.tags,
                        "elapsedTime": 1500 * app.gets, "resourceSecondsMap": {"entry": [
                            {"key": "memory-mb", "value": str(2048 * app.gets)},
                            {"key": "vcores", "value": str(2 * app.gets)}]}}

            def _list(self) -> None:
                rm.requests.append((self.command, self.path))
                if rm.fail_with:
                    self._send(rm.fail_with, {"RemoteException": {"message": "fake RM failure"}})
                    return
                query = parse_qs(urlsplit(self.path).query)
                wanted = set(",".join(query.get("states", [])).split(",")) - {""}
                tags = set(",".join(query.get("applicationTags", [])).split(",")) - {""}  # any of them, as the RM
                apps = [self._report(i, a) for i, a in rm.apps.items()
                        if (not wanted or a.current()[0] in wanted)
                        and (not tags or tags & set(a.tags.split(",")))]
                self._send(200, {"apps": {"app": apps} if apps else None})

            def _output(self) -> None:
                rm.requests.append((self.command, self.path))
                app_id = self.path.split("/")[2]
                offset = int(parse_qs(urlsplit(self.path).query).get("offset", ["0"])[0])
                text = rm.outputs.get(app_id, "")
                self._send(200, {"task": "worker:0", "attempt": 1, "container_id": "container_1", "offset": offset,
                                 "end": len(text), "text": text[offset:], "finished": False})

            def _progress(self) -> None:
                rm.requests.append((self.command, self.path))
                script = rm.progress.get(self.path.split("/")[2])
                if not script:
                    return self._send(404, {"message": "no such page"})
                record = script.pop(0) if len(script) > 1 else script[0]
                self._send(200, {"progress": record, "address": "127.0.0.1:1"})

            def _standby(self) -> bool:
                """RMWebAppFilter's page while no RM is active (an election in progress)."""
                if rm.standby_requests <= 0:
                    return False
                rm.standby_requests -= 1
                rm.requests.append((self.command, self.path))
                data = b"There is no active RM right now.\nHA Zookeeper Connection State: CONNECTED\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return True

            def do_GET(self):
                if self._standby():
                    return
                if urlsplit(self.path).path == "/ws/v1/cluster/apps":
                    return self._list()
                if urlsplit(self.path).path == "/ws/v1/cluster/info":
                    rm.requests.append((self.command, self.path))
                    return self._send(200, {"clusterInfo": {"haState": "ACTIVE", "hadoopVersion": "3.4.2"}})
                if self.path.startswith("/proxy/") and urlsplit(self.path).path.endswith("/progress.json"):
                    return self._progress()
                if self.path.startswith("/proxy/"):
                    return self._output()
                app_id, app = self._app()
                if app is None:
                    return
                self._send(200, {"app": self._report(app_id, app)})

            def do_PUT(self):
                app_id, app = self._app()
                if app is None:
                    return
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                app.killed_by = self.path.split("user.name=")[-1] if "user.name=" in self.path else ""
                app.states = [("KILLED", "KILLED")]
                app.diagnostics = "Application killed by user."
                self._send(202, {"state": "KILLED"})

        class Server(ThreadingHTTPServer):
            request_queue_size = 512  # hundreds of triggers connect at once (socketserver's default is 5)

        self.server = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def count(self, method: str) -> int:
        return sum(1 for m, _ in self.requests if m == method)
