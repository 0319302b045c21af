"""The runtime's HTTP port on a real cluster with two users: the dashboard's JSON API shows each
user what the gRPC status shows them (bob never sees alice's call names or ids), /metrics
answers Prometheus from loopback, `bulletin up` / `bulletin status` / Hello name the dashboard,
and a real headless Chromium (Debian's, driven by selenium through chromedriver) logs in,
refuses a wrong token, shows a running and a waiting call with its reason and draws the chart.
The browser's screenshot is saved to tests/artifacts/dashboard.png."""

from __future__ import annotations

import json
import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import bulletin
from cluster_support import (ALICE, BOB, CALL_SECONDS, run_cli, start_two_user_cluster,
                             wait_for_file, wait_until)

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"

pytestmark = pytest.mark.timeout(240)


def alice_secret_queued(x: int) -> int:
    return x


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    home = tmp_path_factory.mktemp("bulletin-dashboard")
    c = start_two_user_cluster(home)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def alices_calls(cluster, tmp_path_factory):
    """Alice's call holding the one GPU, and her next call waiting for it."""
    gate = tmp_path_factory.mktemp("gate") / "open"
    with bulletin.Client(cluster.address, token=ALICE, set_as_default=False) as alice:
        running = alice.submit(wait_for_file, str(gate), 120, gpus=1)
        wait_until(lambda: running.status == "running", timeout=CALL_SECONDS, what="alice's call")
        queued = alice.submit(alice_secret_queued, 3, gpus=1)
        wait_until(lambda: alice.status().queue, timeout=CALL_SECONDS, what="alice's queued call")
        try:
            yield alice, running, queued
        finally:
            gate.touch()
            assert running.result(timeout=CALL_SECONDS) is True
            assert queued.result(timeout=CALL_SECONDS) == 3


def get(cluster, path: str, token: str | None = None):
    """(status, body text, headers) of a GET on the cluster's HTTP port."""
    request = urllib.request.Request(cluster.info["dashboard_url"] + path.lstrip("/"),
                                     headers={"Origin": "https://evil.example"})
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode(), response.headers
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), error.headers


def api(cluster, path: str, token: str) -> dict:
    status, body, _ = get(cluster, path, token)
    assert status == 200, body
    return json.loads(body)


def test_up_status_and_hello_name_the_dashboard(cluster):
    url = cluster.info["dashboard_url"]
    assert url == f"http://127.0.0.1:{cluster.info['http_port']}/"
    assert f"dashboard: {url}" in cluster.up_output
    assert f"metrics: {url}metrics" in cluster.up_output
    status = run_cli(cluster.home, "status", timeout=30)
    assert status.returncode == 0, status.stderr
    assert f"dashboard: {url}" in status.stdout
    with bulletin.Client(cluster.address, token=BOB, set_as_default=False) as bob:
        assert bob._conn.hello.dashboard_url == url


def test_http_port_option_is_checked_and_compared_with_the_running_runtime(cluster, tmp_path):
    bad = run_cli(tmp_path, "up", "--http-port", "eighty", timeout=30)
    assert bad.returncode == 2 and "--http-port: must be a port number (0 = any free) or off" \
        in bad.stderr
    again = run_cli(cluster.home, "up", "--http-port", "off", timeout=60)
    assert again.returncode == 0, again.stderr
    assert f"--http-port off: it has HTTP port {cluster.info['http_port']}" in again.stderr


def test_the_api_shows_each_user_only_their_own_calls(cluster, alices_calls):
    _, running, queued = alices_calls
    mine = api(cluster, "/api/status", ALICE)
    assert [(c["task_id"], c["name"]) for c in mine["running"]] == [(running.key, "wait_for_file")]
    assert [(c["task_id"], c["name"], c["position"]) for c in mine["queue"]] == [
        (queued.key, "alice_secret_queued", 1)]
    assert mine["queue"][0]["reason"]
    assert mine["others_running"] == 0 and mine["others_queued"] == 0

    for path in ("/api/status", "/api/usage", "/api/history", "/api/whoami"):
        status, text, _ = get(cluster, path, BOB)
        assert status == 200, text
        for secret in (running.key, queued.key, "wait_for_file", "alice_secret_queued"):
            assert secret not in text, f"{path} shows bob {secret}"
    theirs = api(cluster, "/api/status", BOB)
    assert theirs["running"] == [] and theirs["queue"] == []
    assert theirs["others_running"] == 1 and theirs["others_queued"] == 1
    assert theirs["gpus"]["reserved"] == 1  # the cluster's numbers are everyone's
    usage = api(cluster, "/api/usage", BOB)
    assert {g["name"] for g in usage["groups"]} <= {"nlp"}
    assert {u["name"] for u in usage["users"]} <= {"bob"}

    everything = api(cluster, "/api/status", cluster.token)  # the owner sees every call
    assert {c["task_id"] for c in everything["running"]} == {running.key}
    assert {c["task_id"] for c in everything["queue"]} == {queued.key}


def test_the_api_refuses_wrong_and_worker_tokens_and_allows_no_other_origin(cluster):
    status, text, headers = get(cluster, "/api/status", "not-a-token-of-this-cluster")
    assert status == 401 and "not known to this cluster" in json.loads(text)["error"]
    assert get(cluster, "/api/status")[0] == 401
    worker_token = (cluster.home / "worker-token").read_text().strip()
    status, text, _ = get(cluster, "/api/status", worker_token)
    assert status == 403 and "worker token" in text
    for path in ("/", "/api/status", "/metrics"):
        assert "Access-Control-Allow-Origin" not in get(cluster, path, ALICE)[2]


def test_metrics_answer_prometheus_from_loopback_without_a_token(cluster, alices_calls):
    _, running, queued = alices_calls
    status, text, headers = get(cluster, "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    for series in ('bulletin_gpus{state="total",worker="local"} 1.0',
                   'bulletin_gpus{state="reserved",worker="local"} 1.0',
                   'bulletin_calls{qos="interactive",state="running"} 1.0',
                   'bulletin_calls{qos="interactive",state="queued"} 1.0',
                   "bulletin_call_queue_wait_seconds_bucket{",
                   "bulletin_store_objects ", "bulletin_scheduler_pass_seconds_count "):
        assert series in text, f"{series} not in\n{text}"
    assert running.key not in text and queued.key not in text and "alice_secret" not in text


# ---- the page in a real browser -------------------------------------------------------------

@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        pytest.skip(f"{CHROMIUM} or {CHROMEDRIVER} is missing: `make test` installs them with "
                    ".ci/chromium.sh when it runs as root with apt; elsewhere: apt-get install "
                    "chromium chromium-driver")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is in the [test] extra")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tmp_path_factory.mktemp("chromium-profile")
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}",
                 "--window-size=1280,1600"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def log_in(browser, token: str) -> None:
    from selenium.webdriver.common.by import By
    field = browser.find_element(By.ID, "token")
    field.clear()
    field.send_keys(token)
    browser.find_element(By.CSS_SELECTOR, "#login-form button").click()


def text_of(browser, element_id: str) -> str:
    from selenium.webdriver.common.by import By
    return browser.find_element(By.ID, element_id).text


def test_the_page_in_chromium(cluster, alices_calls, browser):
    from selenium.webdriver.common.by import By
    _, running, queued = alices_calls
    browser.get(cluster.info["dashboard_url"])
    assert browser.find_element(By.ID, "login").is_displayed()

    log_in(browser, "not-a-token-of-this-cluster")
    wait_until(lambda: browser.find_element(By.ID, "login-error").is_displayed(), timeout=20,
               what="the refusal")
    assert "Refused" in text_of(browser, "login-error")
    assert "not known to this cluster" in text_of(browser, "login-error")
    assert not browser.find_element(By.ID, "dashboard").is_displayed()
    # The token is never put in the page's address.
    assert "token" not in browser.current_url

    log_in(browser, ALICE)
    wait_until(lambda: running.key in text_of(browser, "running"), timeout=20,
               what="alice's running call on the page")
    assert "wait_for_file" in text_of(browser, "running")
    queue = text_of(browser, "queue")
    reason = api(cluster, "/api/status", ALICE)["queue"][0]["reason"]
    assert "alice_secret_queued" in queue and queued.key in queue and reason in queue
    assert "logged in as alice" in text_of(browser, "who")

    # The chart draws once it has two samples (one every 2 s): lines, not an empty canvas.
    chart = browser.find_element(By.ID, "chart")
    wait_until(lambda: int(chart.get_attribute("data-samples") or 0) >= 2, timeout=30,
               what="two samples in the chart")
    wait_until(lambda: browser.execute_script(
        "const c = document.getElementById('chart');"
        "const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        "let n = 0; for (let i = 3; i < d.length; i += 4) { if (d[i] > 0) n++; } return n;") > 500,
        timeout=10, what="the chart's lines")
    history = api(cluster, "/api/history", ALICE)
    note = text_of(browser, "chart-note")
    assert ("No utilisation samples" in note) == (not history["busy_sampled"])
    ARTIFACTS.mkdir(exist_ok=True)
    assert browser.save_screenshot(str(ARTIFACTS / "dashboard.png"))

    # Bob, in the same tab after logging out, sees the cluster but none of alice's calls.
    browser.find_element(By.ID, "logout").click()
    log_in(browser, BOB)
    wait_until(lambda: "of other users" in text_of(browser, "others-running"), timeout=20,
               what="bob's view")
    page = browser.find_element(By.TAG_NAME, "body").text
    for secret in (running.key, queued.key, "wait_for_file", "alice_secret_queued"):
        assert secret not in page
    assert "1 queued call(s) of other users" in text_of(browser, "others-queued")
