"""The web playground in real browsers: Debian's headless Chromium, driven through its
chromium-driver, and Firefox (firefox-esr over WebDriver BiDi, tests/python/firefox), against a
real agentd (debug build, `[playground] enabled` through AGENTD_PLAYGROUND) and the mock model
server. Each state is saved as a screenshot under target/playground-screenshots/ for a person to
look at."""

import json
import re
import shutil
import subprocess

import pytest
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

from conftest import API_KEY, ROOT, start_agentd, stop_agentd

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
SHOTS = ROOT / "target" / "playground-screenshots"

CONFIG = """
[[providers]]
name = "mock"
base_url = "{base_url}"

[[agents]]
id = "careful"
name = "Careful"
instructions = "You work through a task list; a human approves every list."
model = "mock/worker"
tools = ["tasks"]
require_approval = ["task_write"]

[[agents]]
id = "worker"
name = "Worker"
description = "Works through a task list"
instructions = "You work through a task list."
model = "mock/slow-worker"
tools = ["tasks"]
"""

# Records every state the task list and the answer pass through, so the test can tell that the
# list filled and ticked and the text streamed in, however fast the run was.
RECORDER = """
window.__tasks = []; window.__texts = []; window.__active = [];
new MutationObserver(() => {
  const marks = [...document.querySelectorAll('#tasks .task')].map(t => t.classList.contains('completed'));
  window.__tasks.push(marks);
  const active = document.querySelector('#tasks .task.in_progress .active');
  if (active) window.__active.push(active.textContent);
}).observe(document.getElementById('tasks'), {childList: true, subtree: true});
new MutationObserver(() => {
  const last = [...document.querySelectorAll('#messages .msg.assistant .text')].pop();
  if (last) window.__texts.push(last.textContent);
}).observe(document.getElementById('messages'), {childList: true, subtree: true, characterData: true});
"""


def chromium(width=1400, height=1000):
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", f"--window-size={width},{height}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # The driver is given: Selenium Manager is never asked to download one.
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


@pytest.fixture(scope="module")
def playground(mock_model):
    proc, address = start_agentd(CONFIG.format(base_url=mock_model), AGENTD_PLAYGROUND="true")
    yield f"http://{address}"
    stop_agentd(proc)


@pytest.fixture(scope="module")
def browser():
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver = chromium()
    yield driver
    driver.quit()


def wait(driver, condition, timeout=15, what="the page"):
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.05).until(lambda d: condition(d))
    except TimeoutException:
        shot(driver, "timeout")
        pytest.fail(f"timed out waiting for {what}; screenshot in {SHOTS / 'timeout.png'}")


def shot(driver, name):
    driver.save_screenshot(str(SHOTS / f"{name}.png"))


def css(driver, selector):
    return driver.find_elements(By.CSS_SELECTOR, selector)


def text_of(driver, selector):
    found = css(driver, selector)
    return found[-1].text if found else ""


def open_page(driver, base, fragment=""):
    driver.get(f"{base}/#{fragment}")
    wait(driver, lambda d: Select(d.find_element(By.ID, "agent")).options, what="the agent list")
    driver.execute_script(RECORDER)


def choose_agent(driver, agent_id):
    Select(driver.find_element(By.ID, "agent")).select_by_value(agent_id)


def send(driver, text):
    prompt = driver.find_element(By.ID, "prompt")
    prompt.send_keys(text)
    prompt.send_keys(Keys.ENTER)  # Enter sends: the keyboard path


def run_status(driver):
    return driver.find_element(By.ID, "run-status").text


def no_errors_logged(driver):
    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not severe, severe


def test_chat_streams_the_answer_and_the_task_list_fills_and_ticks(playground, browser):
    open_page(browser, playground, "resource=browser-chat")
    choose_agent(browser, "worker")
    # The agent card shows what the agent is.
    browser.find_element(By.CSS_SELECTOR, "#agent-card summary").click()
    details = browser.find_element(By.ID, "agent-details").text
    assert "You work through a task list." in details and "task_write" in details and "mock/slow-worker" in details

    send(browser, "Plan, Build, Ship")
    wait(browser, lambda d: "Done: Plan" in text_of(d, ".msg.assistant .text.streaming"), what="the answer to start streaming")
    shot(browser, "01-streaming")
    wait(browser, lambda d: run_status(d) == "finished", what="the run to finish")
    assert text_of(browser, ".msg.assistant .text") == "Done: Plan, Build, Ship"
    texts = browser.execute_script("return window.__texts")
    partial = [t for t in texts if t and t != "Done: Plan, Build, Ship"]
    assert partial and all("Done: Plan, Build, Ship".startswith(t) for t in partial), texts

    wait(browser, lambda d: len(css(d, "#tasks .task.completed")) == 3, what="every task ticked")
    assert [t.text for t in css(browser, "#tasks .task .content")] == ["Plan", "Build", "Ship"]
    assert browser.find_element(By.ID, "task-count").text == "3 of 3 done"
    assert browser.find_element(By.ID, "task-progress").get_attribute("value") == "3"
    states = browser.execute_script("return window.__tasks")
    filling = [s for s in states if len(s) == 3 and not all(s)]
    assert filling and filling[0] != [True, True, True], states
    # The task in progress shows its activeForm.
    assert "Working on Plan" in browser.execute_script("return window.__active")
    # Tool calls and per-step usage are shown inline.
    assert len(css(browser, ".msg.assistant .tool")) == 4
    steps = [s.text for s in css(browser, ".msg.assistant .step")]
    assert len(steps) == 5 and "tokens" in steps[0], steps
    # The run's trace id, ready to copy.
    assert re.fullmatch(r"[0-9a-f]{32}", browser.find_element(By.ID, "trace-id").text)
    assert re.fullmatch(r"[0-9a-f]{32}", browser.find_element(By.ID, "run-id").text)
    shot(browser, "02-tasks-done")

    # The thread is in the list, and reopening it shows its history from ThreadService.
    thread = browser.find_element(By.ID, "thread-id").text
    browser.find_element(By.ID, "new-thread").click()
    assert not css(browser, ".msg")
    wait(browser, lambda d: css(d, f'#threads button[data-thread="{thread}"]'), what="the thread in the list")
    css(browser, f'#threads button[data-thread="{thread}"]')[0].click()
    wait(browser, lambda d: text_of(d, ".msg.assistant .text") == "Done: Plan, Build, Ship", what="the history")
    assert text_of(browser, ".msg.user .body") == "Plan, Build, Ship"
    wait(browser, lambda d: len(css(d, "#tasks .task.completed")) == 3, what="the reopened thread's tasks")
    no_errors_logged(browser)


def test_approve_one_call_and_decline_another_with_a_reason(playground, browser):
    open_page(browser, playground, "resource=browser-approvals")
    choose_agent(browser, "careful")
    send(browser, "Review, Merge")
    wait(browser, lambda d: css(d, "#pending li button.approve"), what="the call to wait for approval")
    assert run_status(browser) == "waiting for you"
    assert "task_write" in text_of(browser, "#pending li")
    shot(browser, "03-waiting-for-approval")

    css(browser, "#pending li button.approve")[0].click()
    wait(browser, lambda d: run_status(d) == "finished", what="the approved run to finish")
    wait(browser, lambda d: len(css(d, "#tasks .task.completed")) == 2, what="the approved list to tick")
    assert text_of(browser, ".msg.assistant .text") == "Done: Review, Merge"
    assert not css(browser, "#pending li")
    shot(browser, "04-approved-and-finished")

    send(browser, "Deploy")
    wait(browser, lambda d: css(d, "#pending li button.decline"), what="the second call to wait")
    reason = browser.find_element(By.CSS_SELECTOR, "#pending li input.reason")
    reason.send_keys("Not on a Friday")
    css(browser, "#pending li button.decline")[0].click()
    wait(browser, lambda d: run_status(d) == "finished", what="the declined run to finish")
    assert text_of(browser, ".msg.assistant .text") == "Stopped: Not on a Friday"
    assert css(browser, '.msg.assistant .tool[data-state="declined"]')
    # The declined list was never written: the approved one stands.
    assert [t.text for t in css(browser, "#tasks .task .content")] == ["Review", "Merge"]
    shot(browser, "05-declined-with-a-reason")
    no_errors_logged(browser)


def test_a_client_tool_is_answered_through_a_form_built_from_its_resume_schema(playground, browser):
    open_page(browser, playground, "resource=browser-client-tool")
    choose_agent(browser, "worker")
    browser.find_element(By.CSS_SELECTOR, ".options summary").click()
    tools = [{
        "name": "ask_user", "description": "Ask the user a question",
        "parameters": {"type": "object", "properties": {"question": {"type": "string"}}},
        "resumeSchema": {"type": "object", "required": ["answer"], "properties": {
            "answer": {"type": "string", "description": "What the user says"},
            "sure": {"type": "boolean"},
            "mood": {"enum": ["calm", "busy"]},
        }},
    }]
    browser.find_element(By.ID, "client-tools").send_keys(json.dumps(tools))
    send(browser, '/call ask_user {"question": "Which colour?"}')
    wait(browser, lambda d: css(d, '#pending li input[name="answer"]'), what="the client tool's form")
    shot(browser, "06-client-tool-form")
    # A required field left empty is refused in the page, naming it.
    css(browser, "#pending li button[type=submit]")[0].click()
    assert "answer is required" in text_of(browser, "#pending li .outcome")
    css(browser, '#pending li input[name="answer"]')[0].send_keys("blue")
    css(browser, '#pending li input[name="sure"]')[0].click()
    Select(css(browser, '#pending li select[name="mood"]')[0]).select_by_visible_text("busy")
    css(browser, "#pending li button[type=submit]")[0].click()
    wait(browser, lambda d: run_status(d) == "finished", what="the answered run to finish")
    answer = text_of(browser, ".msg.assistant .text")
    assert answer.startswith("Got: ") and json.loads(answer[5:]) == {"answer": "blue", "sure": True, "mood": "busy"}
    shot(browser, "07-client-tool-answered")
    no_errors_logged(browser)


def test_reattach_to_a_run_by_id_and_abort_one(playground, browser):
    open_page(browser, playground, "resource=browser-observe")
    choose_agent(browser, "worker")
    send(browser, "One")
    wait(browser, lambda d: run_status(d) == "finished", what="the first run")
    run_id = browser.find_element(By.ID, "run-id").text

    field = browser.find_element(By.ID, "observe-run")
    field.send_keys(run_id)
    field.send_keys(Keys.ENTER)
    wait(browser, lambda d: len(css(d, ".msg.assistant")) == 2 and text_of(d, ".msg.assistant .text") == "Done: One", what="the observed replay")
    assert "observed" in css(browser, ".msg.assistant .who")[-1].text

    send(browser, "Take the long way round and answer slowly word by word")
    wait(browser, lambda d: "Done:" in text_of(d, ".msg.assistant .text.streaming"), what="the slow answer")
    abort = browser.find_element(By.ID, "abort")
    assert abort.is_displayed()
    abort.click()
    wait(browser, lambda d: run_status(d) == "aborted", what="the abort")
    outcomes = [e.text for e in css(browser, ".msg.assistant:last-child .outcome")]
    assert "Aborted: Aborted from the playground" in outcomes, outcomes
    shot(browser, "08-aborted")
    no_errors_logged(browser)


def test_everything_comes_from_agentd_and_fits_a_phone(playground, browser):
    open_page(browser, playground, "resource=browser-phone")
    urls = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert urls and all(u.startswith(playground) for u in urls), urls
    browser.set_window_size(390, 844)
    try:
        wait(browser, lambda d: d.execute_script("return innerWidth") < 500, what="the phone width")
        overflow = browser.execute_script("return document.documentElement.scrollWidth - innerWidth")
        assert overflow <= 0, f"the page is {overflow}px wider than a phone"
        shot(browser, "09-phone-width")
    finally:
        browser.set_window_size(1400, 1000)


def test_a_server_with_keys_asks_for_one(mock_model):
    proc, address = start_agentd(CONFIG.format(base_url=mock_model), AGENTD_PLAYGROUND="true", AGENTD_API_KEYS=API_KEY)
    driver = chromium()
    try:
        driver.get(f"http://{address}/")
        key = driver.find_element(By.ID, "key")
        wait(driver, lambda d: key.is_displayed(), what="the key field")
        assert "requires an API key" in driver.find_element(By.ID, "notice").text
        key.send_keys("wrong-key")
        key.send_keys(Keys.ENTER)
        wait(driver, lambda d: d.find_element(By.ID, "notice").text.startswith("Listing agents"), what="the refusal")
        assert not Select(driver.find_element(By.ID, "agent")).options
        key.clear()
        key.send_keys(API_KEY)
        key.send_keys(Keys.ENTER)
        wait(driver, lambda d: len(Select(d.find_element(By.ID, "agent")).options) == 2, what="the agents with the key")
        shot(driver, "10-api-key")
    finally:
        driver.quit()
        stop_agentd(proc)


def test_it_works_in_firefox_too(playground):
    """The same page in Debian's firefox-esr over WebDriver BiDi (tests/python/firefox/smoke.mjs):
    a chat whose task list fills and ticks, and an approval."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    script = ROOT / "tests" / "python" / "firefox" / "smoke.mjs"
    done = subprocess.run(["node", str(script), playground, str(SHOTS)], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "chat, task list and approval work" in done.stdout
