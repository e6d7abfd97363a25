#!/usr/bin/env python3
"""Drives the web console in headless Chromium (Selenium with Debian's
chromium and chromium-driver) and checks that its pages show the broker's
real state, then swaps a plugin in through the upload form.

Usage: console_browser.py URL USER PASSWORD SCREENSHOT_DIR EXPECT_JSON MODULE
  EXPECT_JSON: {"topics": {name: partitions}, "group": id,
                "lag": {"topic-partition": lag}, "total_lag": n}
  MODULE: a .wasm file uploaded as module `topic_summary`.
Saves one PNG per page in SCREENSHOT_DIR and prints one JSON line with
what it saw; exits non-zero on a failed check.
"""

import base64
import json
import os
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from checks import check

url, user, password, shots, expect_json, module = sys.argv[1:7]
expect = json.loads(expect_json)
os.makedirs(shots, exist_ok=True)

options = webdriver.ChromeOptions()
for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
            "--disable-gpu", "--window-size=1360,1000"):
    options.add_argument(arg)
options.binary_location = "/usr/bin/chromium"
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
driver.set_page_load_timeout(30)
wait = WebDriverWait(driver, 20)
seen = {}


def shot(name):
    """A screenshot of the whole page (not only the window)."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1360, max(700, min(height + 40, 4000)))
    path = os.path.join(shots, name + ".png")
    check(driver.save_screenshot(path), f"screenshot {path}")
    driver.set_window_size(1360, 1000)


def cells(table_id):
    """The rows of a table as lists of cell texts, read in one script (a
    page reloading meanwhile gives none rather than stale elements)."""
    return driver.execute_script(
        "const t = document.getElementById(arguments[0]);"
        "return t ? [...t.tBodies[0].rows].map(r => [...r.cells].map(c => c.innerText.trim())) : [];",
        table_id) or []


try:
    # Without credentials the browser is challenged for basic ones (and,
    # headless, shows nothing).
    driver.get(url + "/")
    check("cluster-id" not in driver.page_source,
          f"an unauthenticated page is refused: {driver.page_source[:300]}")

    # The browser's basic credentials, on every request the pages make.
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setExtraHTTPHeaders",
                           {"headers": {"Authorization": f"Basic {token}"}})

    # Overview: the cluster, its one broker, and live charts.
    driver.get(url + "/")
    check(driver.title.startswith("Overview"), f"title {driver.title!r}")
    brokers = cells("brokers")
    check(len(brokers) == 1 and "controller" in brokers[0][3], f"brokers {brokers}")
    seen["topic_count"] = int(driver.find_element(By.ID, "topic-count").text)
    check(seen["topic_count"] >= len(expect["topics"]), f"topic count {seen['topic_count']}")
    # Two polls of /metrics give the first rates; the consumer's fetches
    # and heartbeats are traffic.
    wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#chart-rate polyline"))
    seen["rate_legend"] = driver.find_element(By.ID, "legend-rate").text
    time.sleep(4)
    shot("overview")

    # Topics: names and partition counts.
    driver.get(url + "/console/topics")
    listed = {row[0]: int(row[1]) for row in cells("topics")}
    seen["topics"] = listed
    for name, partitions in expect["topics"].items():
        check(listed.get(name) == partitions, f"topic {name}: {listed}")
    shot("topics")

    # One topic: its partitions with offsets, and its configs.
    first = sorted(expect["topics"])[0]
    driver.find_element(By.LINK_TEXT, first).click()
    wait.until(EC.title_contains(first))
    partitions = cells("partitions")
    check(len(partitions) == expect["topics"][first], f"partitions of {first}: {partitions}")
    configs = {row[0]: row[1] for row in cells("configs")}
    check("cleanup.policy" in configs, f"configs of {first}: {list(configs)[:5]}")
    seen["end_offsets"] = {row[0]: int(row[5]) for row in partitions}
    shot("topic")

    # Groups: the group, its member, and the lag per partition.
    driver.get(url + "/console/groups")
    groups = {row[0]: row for row in cells("groups")}
    group = expect["group"]
    check(group in groups, f"group {group} listed: {groups}")
    seen["group"] = groups[group]
    check(groups[group][4] == "1", f"one member: {groups[group]}")
    check(groups[group][5] == str(expect["total_lag"]), f"total lag: {groups[group]}")
    members = cells(f"members-{group}")
    check(len(members) == 1 and members[0][4], f"member with an assignment: {members}")
    offsets = {f"{row[0]}-{row[1]}": row[4] for row in cells(f"offsets-{group}")}
    seen["lag"] = offsets
    for partition, lag in expect["lag"].items():
        check(offsets.get(partition) == str(lag), f"lag of {partition}: {offsets}")
    shot("groups")

    # Plugins: the handlers per ApiKey, then a swap through the form.
    driver.get(url + "/console/plugins")
    handlers = cells("handlers")
    check(any(len(row) > 1 and row[1] == "Produce" for row in handlers), f"handlers {handlers[:3]}")
    check(not any(len(row) > 2 and "topic_summary" in row[2] for row in handlers),
          "topic_summary not yet loaded")
    wait.until(lambda d: any(c.text not in ("", "–") for c in
                             d.find_elements(By.CSS_SELECTOR, "[data-p99]")))
    driver.find_element(By.ID, "upload-name").send_keys("topic_summary")
    driver.find_element(By.ID, "upload-file").send_keys(os.path.abspath(module))
    driver.find_element(By.ID, "upload-submit").click()
    # The page reloads after the answer and shows the new handler.
    wait.until(lambda d: any(len(row) > 2 and "topic_summary" in row[2]
                             for row in cells("handlers")))
    row = next(row for row in cells("handlers") if len(row) > 2 and "topic_summary" in row[2])
    seen["uploaded"] = row[:6]
    check(row[0] == "1000" and row[1] == "DescribeTopicSummary", f"uploaded row {row}")
    flash = driver.find_element(By.ID, "flash").text
    seen["flash"] = flash
    check("DescribeTopicSummary" in flash, f"flash message {flash!r}")
    # The window as a user sees it after the swap (README's docs/console.png).
    check(driver.save_screenshot(os.path.join(shots, "console.png")), "console.png")
    shot("plugins")
finally:
    driver.quit()

print(json.dumps(seen))
