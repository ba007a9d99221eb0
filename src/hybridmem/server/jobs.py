"""Graph builds and updates as background jobs: a request never holds its worker past its deadline
for work that is allowed to take minutes.

``POST /v1/graph/build`` (and ``/update``) starts a job, or joins the namespace's running one, and
waits for it up to the request's ``wait`` (at most 90 % of the server's ``request_timeout``): done
by then, the answer is the report (200), as before; not yet, it is ``202 Accepted`` with the job
and a ``Location`` to poll (``GET /v1/graph/jobs/{id}``) instead of a 504 with the work abandoned.
Jobs run one at a time on their own thread (a build is CPU-bound: two at once only take twice as
long and starve the queries), each under ``graph_job_timeout``; at most ``max_graph_jobs`` wait.
A finished job is kept for polling (the newest ``keep`` of them).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .. import deadline
from ..errors import HybridMemError

__all__ = ["GraphJob", "GraphJobs", "JobQueueFull"]

log = logging.getLogger("hybridmem.server.errors")


class JobQueueFull(HybridMemError):
    """Too many graph jobs are waiting (HTTP 429)."""

    http_status = 429
    error_type = "too_many_requests"
    http_headers = (("Retry-After", "5"),)


@dataclass
class GraphJob:
    """One build or update of one namespace's graph."""

    id: str
    namespace: str
    kind: str  # "build" | "update"
    created_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    future: Future[Any] = field(default_factory=Future, repr=False)

    @property
    def state(self) -> str:
        if not self.future.done():
            return "running" if self.started_at is not None else "queued"
        return "failed" if self.future.exception() is not None else "done"

    def view(self) -> dict[str, Any]:
        """The job as the API shows it: state, times, the report when done, the error when failed."""
        out: dict[str, Any] = {
            "job_id": self.id,
            "namespace": self.namespace,
            "kind": self.kind,
            "state": self.state,
            "created_at": self.created_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "report": None,
            "error": None,
        }
        if self.state == "done":
            report = self.future.result()
            out["report"] = report.model_dump(mode="json") if hasattr(report, "model_dump") else report
        elif self.state == "failed":
            e = self.future.exception()
            kind = getattr(e, "error_type", None) or "internal"
            message = str(e) if isinstance(e, HybridMemError) else "the job failed (details are in the server log)"
            out["error"] = {"type": kind, "message": message, "field": getattr(e, "field", None)}
        return out


class GraphJobs:
    """The server's graph jobs: one running at a time, one per namespace, a bounded queue."""

    def __init__(self, timeout: float, max_waiting: int = 16, keep: int = 256) -> None:
        self.timeout, self.max_waiting, self.keep = timeout, max_waiting, keep
        self._jobs: OrderedDict[str, GraphJob] = OrderedDict()
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None

    def start(self, namespace: str, kind: str, fn: Callable[[str], Any]) -> GraphJob:
        """A new job running ``fn(namespace)``, or the namespace's job that has not finished yet."""
        with self._lock:
            for job in self._jobs.values():
                if job.namespace == namespace and not job.future.done():
                    return job  # a build and an update at once would only redo each other's work
            if sum(1 for j in self._jobs.values() if j.state == "queued") >= self.max_waiting:
                raise JobQueueFull(f"{self.max_waiting} graph jobs are waiting already; retry later")
            job = GraphJob(uuid.uuid4().hex, namespace, kind)
            self._jobs[job.id] = job
            self._forget_old()
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hybridmem-graph")
            self._executor.submit(self._run, job, fn)
            return job

    def _run(self, job: GraphJob, fn: Callable[[str], Any]) -> None:
        job.started_at = time.time()
        try:
            with deadline.within(self.timeout):
                result = fn(job.namespace)
        except BaseException as e:  # the job records it; the poller reads it
            if not isinstance(e, HybridMemError):
                log.exception("graph job %s (%s of namespace %r) failed", job.id, job.kind, job.namespace)
            job.finished_at = time.time()
            job.future.set_exception(e)
        else:
            job.finished_at = time.time()
            job.future.set_result(result)

    def _forget_old(self) -> None:
        finished = [k for k, j in self._jobs.items() if j.future.done()]
        for k in finished[: max(0, len(finished) - self.keep)]:
            del self._jobs[k]

    def get(self, job_id: str) -> GraphJob | None:
        with self._lock:
            return self._jobs.get(job_id)

    def shutdown(self) -> None:
        """Queued jobs are cancelled; a running one ends at its timeout (its thread cannot be killed)."""
        with self._lock:
            if self._executor is not None:
                self._executor.shutdown(wait=False, cancel_futures=True)
                self._executor = None
            for job in self._jobs.values():
                if job.started_at is None and not job.future.done():
                    job.future.set_exception(HybridMemError("the server stopped before the job started"))
