"""The team recipe of docs/tracking.md, run as written: `mlflow server --app-name basic-auth` bound to
127.0.0.1 refuses a client without credentials, takes a stage's run (metrics, params, a report
uploaded through the server) from a user with them, and keeps other users from changing it."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import mlflow
import pytest
from mlflow.exceptions import MlflowException
from mlflow.server import get_app_client
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from helpers import SeedPlan
from lmforge.door import execute
from lmforge.stage import Stage, StageResult

ADMIN = ("admin", secrets.token_urlsafe(12))
STARTUP_SECONDS = 180  # a guard against a server that never comes up (about 10 s idle, 40 s on a busy host)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def server(tmp_path):
    """A basic-auth tracking server as docs/tracking.md starts it, with a sqlite store under tmp_path."""
    (tmp_path / "basic_auth.ini").write_text(
        "[mlflow]\n"
        "default_permission = READ\n"
        f"database_uri = sqlite:///{tmp_path}/basic_auth.db\n"
        f"admin_username = {ADMIN[0]}\n"
        f"admin_password = {ADMIN[1]}\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
    )
    port = free_port()
    env = {
        **os.environ,
        "MLFLOW_AUTH_CONFIG_PATH": str(tmp_path / "basic_auth.ini"),
        "MLFLOW_FLASK_SERVER_SECRET_KEY": secrets.token_hex(16),
    }
    command = [sys.executable, "-m", "mlflow", "server", "--app-name", "basic-auth", "--host", "127.0.0.1",
               "--port", str(port), "--workers", "1", "--backend-store-uri", f"sqlite:///{tmp_path}/mlruns.db",
               "--artifacts-destination", str(tmp_path / "artifacts")]  # fmt: skip
    log = open(tmp_path / "server.log", "w")
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            try:
                urllib.request.urlopen(f"{uri}/health", timeout=5)
                break
            except (urllib.error.URLError, ConnectionError):
                assert process.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "the tracking server did not start"
                time.sleep(0.5)
        yield uri
    finally:
        process.terminate()
        process.wait(timeout=60)
        log.close()
        mlflow.set_tracking_uri(None)


def as_user(monkeypatch, user: tuple[str, str] | None) -> None:
    for variable, value in zip(("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"), user or ("", "")):
        if user:
            monkeypatch.setenv(variable, value)
        else:
            monkeypatch.delenv(variable, raising=False)


@pytest.mark.slow
def test_a_basic_auth_server_takes_runs_from_its_users_only(server, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DVC_STAGE", raising=False)
    monkeypatch.delenv("LMFORGE_PIPELINE", raising=False)
    with pytest.raises(urllib.error.HTTPError) as refused:  # no credentials: nothing to read
        urllib.request.urlopen(f"{server}/api/2.0/mlflow/experiments/search?max_results=1", timeout=10)
    assert refused.value.code == 401

    as_user(monkeypatch, ADMIN)  # the admin adds the team's users
    users = get_app_client("basic-auth", tracking_uri=server)
    alice, bob = ("alice", secrets.token_urlsafe(12)), ("bob", secrets.token_urlsafe(12))
    users.create_user(*alice)
    users.create_user(*bob)

    as_user(monkeypatch, alice)  # a stage run as alice: params, metrics and a report reach the server
    report = tmp_path / "metrics.json"
    report.write_text('{"loss": 1.5}\n')
    stage = Stage("probe", lambda plan: StageResult({"loss": 1.5}, [str(report)]), SeedPlan)
    cfg = OmegaConf.create(
        {"seed": 7, "logger": {"enabled": True, "tracking_uri": server, "experiment": "team"}}
    )
    execute(stage, cfg)
    client = MlflowClient(tracking_uri=server)
    [run] = client.search_runs([client.get_experiment_by_name("team").experiment_id])
    assert (
        run.info.status == "FINISHED" and run.data.metrics["loss"] == 1.5 and run.data.params["seed"] == "7"
    )
    assert "report/metrics.json" in [a.path for a in client.list_artifacts(run.info.run_id, "report")]

    as_user(monkeypatch, bob)  # another user reads it (default_permission = READ) but cannot change it
    assert MlflowClient(tracking_uri=server).get_run(run.info.run_id).data.metrics["loss"] == 1.5
    with pytest.raises(MlflowException, match="PERMISSION_DENIED|Permission denied"):
        MlflowClient(tracking_uri=server).delete_run(run.info.run_id)

    as_user(monkeypatch, (alice[0], "wrong"))  # a wrong password is refused like none
    with pytest.raises(MlflowException, match="401|Unauthorized|UNAUTHENTICATED|credentials"):
        MlflowClient(tracking_uri=server).get_run(run.info.run_id)
