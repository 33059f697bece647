"""edgedp dashboard and budget --history over a registry: the JSON API's rows and alerts, the
Host check (DNS rebinding), plotly.js served from the package, one-line errors, and the page in
a real headless Chromium (Selenium, /usr/bin/chromedriver): devices listed, charts drawn with
data, a screenshot in build/dashboard.png."""
from __future__ import annotations

import datetime as dt
import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from ..helpers import ROOT, one_line_error, require, run_cli, start_cli

require("starlette", "plotly")
from sqlalchemy import create_engine, text  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from edgedp.dashboard import app, queries  # noqa: E402

DAY0 = 20454  # 2026-01-01
SCHEMA = """
CREATE TABLE devices (id VARCHAR(64) PRIMARY KEY, board VARCHAR(32), target TEXT, emulated BOOLEAN,
  added_at DATETIME);
CREATE TABLE state_snapshots (id INTEGER PRIMARY KEY, device_id VARCHAR(64), taken_at DATETIME, day INTEGER,
  recorded_day INTEGER, daily_cap BIGINT, daily_spent BIGINT, lifetime_cap BIGINT, lifetime_spent BIGINT,
  epsilon_per_query BIGINT, auth_counter BIGINT, store VARCHAR(32), store_ok BOOLEAN, rate_burst INTEGER,
  rate_per_minute INTEGER, rate_tarpit_ms INTEGER, audit_total BIGINT, audit_lost BIGINT);
CREATE TABLE syncs (id INTEGER PRIMARY KEY, device_id VARCHAR(64), at DATETIME, outcome VARCHAR(16),
  detail TEXT, snapshot_id INTEGER);
CREATE TABLE audit_entries (id INTEGER PRIMARY KEY, device_id VARCHAR(64), seq BIGINT, day INTEGER,
  counter BIGINT, event VARCHAR(32), arg INTEGER, detail TEXT, first_seen DATETIME);
CREATE TABLE dpsgd_runs (id INTEGER PRIMARY KEY, name TEXT, started_at DATETIME, epsilon FLOAT, delta FLOAT,
  relation VARCHAR(32), manifest TEXT);
CREATE TABLE dpsgd_epochs (id INTEGER PRIMARY KEY, run_id INTEGER, epoch INTEGER, epsilon FLOAT);
"""
"""The registry's tables as edgedp/fleet/registry.py declares them (the columns the dashboard reads)."""


def snap(c, sid: int, dev: str, day: int, daily: int, lifetime: int, store_ok: bool = True, lost: int = 0) -> None:
    c.execute(text("INSERT INTO state_snapshots VALUES (:id, :d, :t, :day, :day, 1000000, :daily, 10000000, :life, "
                   "100000, 3, :store, :ok, 20, 10, 250, 5, :lost)"),
              {"id": sid, "d": dev, "t": dt.datetime(2026, 1, 1, 12) + dt.timedelta(days=day - DAY0, minutes=sid),
               "day": day, "daily": daily, "life": lifetime, "store": "ok" if store_ok else "lost", "ok": store_ok,
               "lost": lost})


@pytest.fixture
def registry(tmp_path: Path) -> str:
    """Two devices over three days: alpha near its daily cap with an overwritten audit entry,
    beta whose last sync did not authenticate; one DP-SGD run of three epochs."""
    url = f"sqlite:///{tmp_path / 'registry.sqlite'}"
    with create_engine(url).begin() as c:
        for stmt in SCHEMA.split(";"):
            if stmt.strip():
                c.execute(text(stmt))
        c.execute(text("INSERT INTO devices VALUES ('alpha', 'qemu', 'qemu:a.elf', 1, NULL), "
                       "('beta', 'disco_f407vg', '/dev/ttyACM0', 0, NULL)"))
        snap(c, 1, "alpha", DAY0, 300000, 300000)
        snap(c, 2, "alpha", DAY0 + 1, 500000, 800000)
        snap(c, 3, "alpha", DAY0 + 2, 950000, 1750000, lost=2)
        snap(c, 4, "beta", DAY0, 100000, 100000)
        snap(c, 5, "beta", DAY0 + 2, 200000, 300000)
        c.execute(text("INSERT INTO syncs (device_id, outcome, detail, snapshot_id) VALUES "
                       "('alpha', 'ok', NULL, 3), ('beta', 'ok', NULL, 5), ('beta', 'not-authentic', 'bad tag', NULL)"))
        for seq, ev in ((1, "SET_TIME"), (2, "SET_CONFIG"), (5, "BUDGET_EXHAUSTED")):
            c.execute(text("INSERT INTO audit_entries (device_id, seq, day, counter, event, arg, detail) "
                           "VALUES ('alpha', :s, :day, :s, :e, 0, '')"), {"s": seq, "day": DAY0 + seq // 2, "e": ev})
        c.execute(text("INSERT INTO dpsgd_runs VALUES (1, 'digits-mlp', NULL, 2.5, 1e-5, 'add-remove', NULL)"))
        for e, eps in ((1, 1.1), (2, 1.9), (3, 2.5)):
            c.execute(text("INSERT INTO dpsgd_epochs (run_id, epoch, epsilon) VALUES (1, :e, :x)"), {"e": e, "x": eps})
    return url


def client(url: str) -> TestClient:
    return TestClient(app.create_app(queries.open_fleet(url)), base_url="http://127.0.0.1:8741")


def test_devices_rows_and_alerts(registry: str) -> None:
    rows = {r["id"]: r for r in client(registry).get("/api/devices").json()}
    a, b = rows["alpha"], rows["beta"]
    assert a["authenticated"] is True and a["daily_spent"] == 0.95 and a["daily_cap"] == 1.0
    assert a["lifetime_spent"] == 1.75 and a["lifetime_cap"] == 10.0 and a["date"] == "2026-01-03"
    assert (a["rate_burst"], a["rate_per_minute"], a["rate_tarpit_ms"]) == (20, 10, 250)
    assert a["alerts"] == ["daily spend at or above 90% of its cap", "2 audit entries overwritten since the last sync"]
    assert b["authenticated"] is False and b["alerts"] == ["last sync not-authentic: bad tag"]
    assert a["last_seen"].startswith("2026-01-03T12:03")


def test_alerts_store_loss_clock_back_spend_down(registry: str) -> None:
    with create_engine(registry).begin() as c:
        snap(c, 6, "alpha", DAY0 + 1, 0, 100000, store_ok=False)
    a = next(r for r in client(registry).get("/api/devices").json() if r["id"] == "alpha")
    assert a["alerts"] == ["store loss (lost)", "clock moved back", "spend went down"]


def test_series_audit_runs(registry: str) -> None:
    c = client(registry)
    daily = c.get("/api/daily").json()
    assert [(p["date"], p["spent"]) for p in daily["alpha"]] == [("2026-01-01", 0.3), ("2026-01-02", 0.5),
                                                                   ("2026-01-03", 0.95)]
    assert [p["date"] for p in daily["beta"]] == ["2026-01-01", "2026-01-03"]
    assert [e["event"] for e in c.get("/api/audit").json()] == ["SET_TIME", "SET_CONFIG", "BUDGET_EXHAUSTED"]
    (run,) = c.get("/api/runs").json()
    assert run["name"] == "digits-mlp" and [e["epsilon"] for e in run["epochs"]] == [1.1, 1.9, 2.5]


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
    assert r.stdout.splitlines() == [f"{'alpha':20s} 2026-01-01  0.3", f"{'alpha':20s} 2026-01-02  0.5",
                                     f"{'alpha':20s} 2026-01-03  0.95", f"{'beta':20s} 2026-01-01  0.1",
                                     f"{'beta':20s} 2026-01-03  0.2"]
    j = run_cli("budget", "--history", "--json", "--registry", registry)
    assert json.loads(j.stdout) == client(registry).get("/api/daily").json()


def test_errors_one_line(tmp_path: Path) -> None:
    one_line_error(run_cli("budget", "--history", env={"EDGEDP_REGISTRY": None}), "no registry")
    missing = f"sqlite:///{tmp_path / 'none.sqlite'}"
    one_line_error(run_cli("dashboard", "--registry", missing), "unable to open database file")
    assert not (tmp_path / "none.sqlite").exists()
    empty = tmp_path / "empty.sqlite"
    create_engine(f"sqlite:///{empty}").connect().close()
    one_line_error(run_cli("budget", "--history", "--registry", f"sqlite:///{empty}"), "is not an edgedp registry")
    one_line_error(run_cli("dashboard", "--registry", "nosuchdb://x"), "registry URL nosuchdb")
    one_line_error(run_cli("dashboard", "--host", "0.0.0.0", "--registry", missing), "bind one address")
    one_line_error(run_cli("budget", "--registry", missing), "--registry goes with --history")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def served(registry: str):
    """`edgedp dashboard` running on a free port; yields its base URL."""
    port = free_port()
    p = start_cli("dashboard", "--registry", registry, "--port", str(port))
    base = f"http://127.0.0.1:{port}"
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
        assert "2 audit entries overwritten" in rows[0].text and "not-authentic" in rows[1].text
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
        assert counts["audit"]["traces"] == [3] and counts["runs"]["traces"] == [3]
        assert all(c["marks"] > 0 for c in counts.values()), counts
        assert len(driver.find_elements(By.CSS_SELECTOR, "#daily .main-svg")) >= 1
        shot = ROOT / "build" / "dashboard.png"
        shot.parent.mkdir(exist_ok=True)
        driver.save_screenshot(str(shot))
        assert shot.stat().st_size > 10_000
    finally:
        driver.quit()
