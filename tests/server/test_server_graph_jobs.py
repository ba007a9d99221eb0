"""Graph builds and updates as background jobs (issue 16): a long build answers 202 with a job to poll
instead of a 504 with its work abandoned; one job per namespace; a bounded queue; tenancy on polling."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from hybridmem import Memory
from hybridmem.errors import ValidationError
from hybridmem.server.config import ServerConfig
from hybridmem.server.jobs import GraphJobs, JobQueueFull
from server_utils import LiveServer, assert_error

KEY_A, KEY_B = "key-graph-team-a", "key-graph-team-b"
KEYS = {KEY_A: ("a",), KEY_B: ("b",)}
NOTES = [
    "The billing service uses PgBouncer in front of PostgreSQL; HEL-4040 means the pool is exhausted.",
    "Redis caches the checkout service's sessions; raise maxmemory when evictions climb.",
    "The search service calls Elasticsearch; HTTP 504 from it means the cluster is overloaded.",
]


def _poll(c, location: str, seconds: float = 60) -> dict:
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        r = c.get(location)
        assert r.status_code == 200, r.text
        if r.json()["state"] in ("done", "failed"):
            return r.json()
        time.sleep(0.05)
    raise AssertionError("the graph job did not finish")


def test_a_build_that_outlasts_its_wait_is_a_job_to_poll_and_others_cannot_see_it(tmp_path: Path) -> None:
    with Memory(tmp_path / "g.db", embedder="hash") as m:
        for i, t in enumerate(NOTES):
            m.add(t, id=f"n{i}", namespace="a")
        m.add("team b's own note about Kafka consumers", id="b0", namespace="b")
        with LiveServer(m, ServerConfig(api_keys=KEYS)) as s, s.client(KEY_A) as a, s.client(KEY_B) as b:
            r = a.post("/v1/graph/build", json={"wait": 0})
            assert r.status_code in (200, 202), r.text
            if r.status_code == 202:  # the usual case with wait 0: poll it
                job = r.json()
                assert job["state"] in ("queued", "running") and job["namespace"] == "a" and job["kind"] == "build"
                assert r.headers["location"] == f"/v1/graph/jobs/{job['job_id']}"
                assert_error(b.get(r.headers["location"]), 404, "not_found")  # another key: no such job
                done = _poll(a, r.headers["location"])
                assert done["state"] == "done" and done["report"]["entities"] > 0, done
                assert done["finished_at"] >= done["started_at"] >= done["created_at"]
            assert a.get("/v1/graph/status").json()["built"]
            # the default wait: a small graph's update answers with its report, as before jobs
            up = a.post("/v1/graph/update", json={})
            assert up.status_code == 200 and up.json()["namespace"] == "a", up.text
            assert_error(a.get("/v1/graph/jobs/nope"), 404, "not_found")
            assert_error(a.post("/v1/graph/build", json={"wait": -1}), 422, field="wait")
            assert_error(a.post("/v1/graph/build", json={"wait": "soon"}), 422, field="wait")


def test_one_job_per_namespace_a_bounded_queue_and_failures_are_reported() -> None:
    jobs = GraphJobs(timeout=30, max_waiting=1)
    release = threading.Event()

    def slow(ns: str) -> dict:
        release.wait(10)
        return {"namespace": ns}

    def bad(ns: str) -> dict:
        raise ValidationError(f"no chunks in {ns}", field="namespace")

    try:
        first = jobs.start("x", "build", slow)
        assert jobs.start("x", "update", slow) is first  # joined: the namespace's job is still running
        deadline = time.monotonic() + 5
        while first.state != "running" and time.monotonic() < deadline:
            time.sleep(0.01)
        queued = jobs.start("y", "build", bad)  # waits behind x: one job runs at a time
        assert queued.state == "queued"
        with pytest.raises(JobQueueFull):
            jobs.start("z", "build", slow)
        release.set()
        assert first.future.result(10) == {"namespace": "x"}
        with pytest.raises(ValidationError):
            queued.future.result(10)
        view = queued.view()
        error = {"type": "validation_error", "message": "namespace: no chunks in y", "field": "namespace"}
        assert view["state"] == "failed" and view["error"] == error
        assert jobs.get(first.id).view()["report"] == {"namespace": "x"}
        assert jobs.start("x", "build", slow) is not first  # finished: a new build is a new job
    finally:
        release.set()
        jobs.shutdown()
