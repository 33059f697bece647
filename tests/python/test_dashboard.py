"""edgedp dashboard and budget --history over a registry: the JSON API's rows and alerts, the
Host check (DNS rebinding), plotly.js served from the package, one-line errors, and the page in
a real headless Chromium (Selenium, /usr/bin/chromedriver): devices listed, charts drawn with
data, a screenshot in build/dashboard.png."""
from __future__ import annotations

import json
import shutil
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..helpers import ROOT, one_line_error, require, run_cli, start_cli
from .test_fleet_registry import audit, state

require("starlette", "plotly")
from starlette.testclient import TestClient  # noqa: E402

from edgedp.dashboard import app  # noqa: E402
from edgedp.fleet import registry as R  # noqa: E402

DAY0 = 20454  # 2026-01-01


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[str]:
    """Two devices over three days, stored through the registry's own writes from authenticated
    answers: alpha at 95 % of its daily cap with 6 audit events overwritten unread, beta whose
    last sync did not authenticate; one DP-SGD run of three epochs."""
    url = f"sqlite:///{tmp_path / 'registry.sqlite'}"
    reg = R.open_registry(url)
    with reg.session() as s:
        R.add_device(s, "alpha", "qemu:a.elf", "qemu", emulated=True)
        R.add_device(s, "beta", "/dev/ttyACM0", "disco_f407vg")
    syncs = (("alpha", state(3, 3, DAY0), audit(2, [1, 2])), ("alpha", state(5, 8, DAY0 + 1), None),
             ("alpha", state(9.5, 17.5, DAY0 + 2), audit(40, list(range(9, 41)))),
             ("beta", state(1, 1, DAY0), None), ("beta", state(2, 3, DAY0 + 2), None))
    for dev, st, log in syncs:
        assert st is not None
        with reg.session() as s:
            snap, _ = R.add_snapshot(s, dev, st, log)
            R.add_sync(s, dev, "ok", None, snap)
    with reg.session() as s:
        R.add_sync(s, "beta", "not-authentic", "bad tag")
        R.add_training_run(s, "digits-mlp", 2.5, 1e-5, "add-remove", [1.1, 1.9, 2.5])
    reg.close()
    yield url


def client(url: str) -> TestClient:
    return TestClient(app.create_app(R.open_registry(url)), base_url="http://127.0.0.1:8741")


def test_devices_are_fleet_status_rows(registry: str) -> None:
    rows = client(registry).get("/api/devices").json()
    r = run_cli("fleet", "status", "--json", "--registry", registry)
    assert r.returncode == 0, r.stderr
    assert rows == json.loads(r.stdout)
    a, b = rows
    assert (a["id"], a["authenticated"], a["daily_spent"], a["lifetime_spent"]) == ("alpha", True, 9.5, 17.5)
    assert [x["kind"] for x in a["alerts"]] == ["daily-cap", "audit-overwritten"]
    assert (b["id"], b["authenticated"], [x["kind"] for x in b["alerts"]]) == ("beta", False, ["not-authentic"])


def test_series_audit_runs(registry: str) -> None:
    c = client(registry)
    daily = c.get("/api/daily").json()
    assert [(p["date"], p["spent"]) for p in daily["alpha"]] == [("2026-01-01", 3.0), ("2026-01-02", 5.0),
                                                                   ("2026-01-03", 9.5)]
    assert [p["date"] for p in daily["beta"]] == ["2026-01-01", "2026-01-03"]
    events = c.get("/api/audit").json()
    assert [e["seq"] for e in events] == [1, 2, *range(9, 41)] and {e["device"] for e in events} == {"alpha"}
    (run,) = c.get("/api/runs").json()
    assert run["name"] == "digits-mlp" and run["per_epoch"] == [1.1, 1.9, 2.5]


def test_plotly_served_from_the_package_no_cdn(registry: str) -> None:
    from plotly.offline import get_plotlyjs
    c = client(registry)
    page = c.get("/").text
    assert '<script src="/static/plotly.min.js">' in page and "https://" not in page
    js = c.get("/static/plotly.min.js")
    assert js.status_code == 200 and js.text == get_plotlyjs()
    assert c.post("/api/devices").status_code == 405  # read-only


@pytest.mark.parametrize("host", ["evil.example:8741", "127.0.0.1.evil.example", "attacker.test"])
def test_foreign_host_refused(registry: str, host: str) -> None:
    c = client(registry)
    for path in ("/", "/api/devices", "/static/plotly.min.js"):
        r = c.get(path, headers={"Host": host})
        assert r.status_code == 400, (path, r.status_code)
    assert c.get("/api/devices", headers={"Host": "localhost:8741"}).status_code == 200


def test_wildcard_bind_refused() -> None:
    with pytest.raises(ValueError, match="bind one address"):
        app.allowed_hosts("0.0.0.0")


def test_budget_history(registry: str) -> None:
    r = run_cli("budget", "--history", "--registry", registry)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"{'alpha':20s} 2026-01-01  3 of 10", f"{'alpha':20s} 2026-01-02  5 of 10",
                                     f"{'alpha':20s} 2026-01-03  9.5 of 10", f"{'beta':20s} 2026-01-01  1 of 10",
                                     f"{'beta':20s} 2026-01-03  2 of 10"]
    j = run_cli("budget", "--history", "--json", "--registry", registry)
    assert json.loads(j.stdout) == client(registry).get("/api/daily").json()


def test_errors_one_line(tmp_path: Path) -> None:
    one_line_error(run_cli("dashboard", "--registry", "nosuchdb://x"), "registry URL nosuchdb")
    one_line_error(run_cli("budget", "--history", "--registry", "nosuchdb://x"), "registry URL nosuchdb")
    one_line_error(run_cli("dashboard", "--host", "0.0.0.0"), "bind one address")
    one_line_error(run_cli("budget", "--registry", "sqlite://"), "--registry goes with --history")
    r = run_cli("dashboard", "--json", "--host", "0.0.0.0")
    assert json.loads(r.stdout)["exit_code"] == 2, r.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def served(registry: str) -> Iterator[str]:
    """`edgedp dashboard` running on a free port; yields its base URL."""
    port = free_port()
    p = start_cli("dashboard", "--registry", registry, "--port", str(port), "--json")
    assert p.stdout is not None
    base = json.loads(p.stdout.readline())["url"].rstrip("/")
    assert base == f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(base + "/api/devices", timeout=1).close()
                break
            except (urllib.error.URLError, ConnectionError):
                assert p.poll() is None, p.communicate()
                time.sleep(0.05)
        yield base
    finally:
        p.terminate()
        p.communicate(timeout=20)


def test_served_refuses_foreign_host(served: str) -> None:
    """The real server (uvicorn) behind the check: a rebinding page's Host header gets 400."""
    port = served.rsplit(":", 1)[1]
    req = urllib.request.Request(served + "/api/devices", headers={"Host": f"rebind.example:{port}"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=5)
    assert e.value.code == 400
    with urllib.request.urlopen(served + "/api/devices", timeout=5) as r:
        assert [d["id"] for d in json.load(r)] == ["alpha", "beta"]


CHROMEDRIVER = Path("/usr/bin/chromedriver")


def test_page_in_headless_chromium(served: str) -> None:
    require("selenium")
    if not CHROMEDRIVER.exists() or not shutil.which("chromium"):
        pytest.skip("chromium and chromium-driver are not installed (make setup installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or ""
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,2400"):
        opts.add_argument(a)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)
    try:
        driver.get(served + "/")
        WebDriverWait(driver, 60).until(lambda d: d.execute_script(
            "return document.body.dataset.ready || document.body.dataset.error"))
        assert driver.execute_script("return document.body.dataset.error") is None
        rows = driver.find_elements(By.CSS_SELECTOR, "#devices tbody tr")
        assert [r.get_attribute("data-device") for r in rows] == ["alpha", "beta"]
        assert "daily-cap" in rows[0].text and "audit-overwritten" in rows[0].text and "not-authentic" in rows[1].text
        assert "emulated, not private" in rows[0].text
        # Each chart is a Plotly plot with the data it was given: SVG marks drawn for every trace.
        counts = driver.execute_script("""
            const out = {};
            for (const id of ["daily", "lifetime", "audit", "runs"]) {
              const el = document.getElementById(id);
              out[id] = {traces: (el.data || []).map(t => t.y.length),
                         marks: el.querySelectorAll("g.point, path.point").length + el.querySelectorAll("g.trace").length};
            }
            return out;""")
        assert counts["daily"]["traces"] == [3, 2] and counts["lifetime"]["traces"] == [2, 2]
        assert counts["audit"]["traces"] == [34] and counts["runs"]["traces"] == [3]
        assert all(c["marks"] > 0 for c in counts.values()), counts
        assert len(driver.find_elements(By.CSS_SELECTOR, "#daily .main-svg")) >= 1
        shot = ROOT / "build" / "dashboard.png"
        shot.parent.mkdir(exist_ok=True)
        driver.save_screenshot(str(shot))
        assert shot.stat().st_size > 10_000
    finally:
        driver.quit()
