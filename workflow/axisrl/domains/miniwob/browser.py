"""One headless Chromium per process, driving MiniWoB++ pages: tabs lent to episodes, pages read as element lists.

The browser is Debian's ``chromium`` under its ``chromedriver`` (``chromium-driver``), found on ``PATH`` or named
by miniwob's own variables ``MINIWOB_CHROME_BINARY`` and ``MINIWOB_CHROMEDRIVER``; the driver is given
explicitly, so Selenium never looks for (or downloads) one. It starts on first use and quits at exit.

Episodes share it through tabs: each live episode holds one (``MAX_TABS``, at most), and an episode whose
tab was lent to another is restored on its next step by loading its page afresh, seeding it and replaying
its actions (``Browser.restore``): the chosen tasks are deterministic given their seed, and the element
refs are reassigned in the same order because every action is followed by the same page read. Selenium
is not thread-safe, so every use of the browser holds ``Browser.lock`` (the evaluation loop steps
episodes from a thread pool).

A page is read through MiniWoB's own ``core.getDOMInfo`` (the elements with a size, with the refs its
``core.elementClick`` takes) and flattened to a compact list: every element with text or that takes
input, in document order, with its ref, tag, text, value, id and (a ``select``'s) options, and every
element without text or children that has a class or id (the icons some tasks are about), with its
class. Coordinates and colours are left out, and the per-line text pieces MiniWoB cuts a text node into
are joined, so a page reads the same whatever the fonts of the machine.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import miniwob
from miniwob.selenium_actions import execute_press_key, execute_type_text

log = logging.getLogger("axisrl")

HTML_DIR = Path(miniwob.__file__).parent / "html" / "miniwob"
"""The task pages that the ``miniwob`` package ships (loaded as ``file://`` URLs: nothing is fetched)."""
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
DRIVER_NAMES = ("chromedriver",)
INSTALL_HINT = "apt-get install -y --no-install-recommends chromium chromium-driver"
CHROME_ARGUMENTS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-extensions",
    "--disable-background-timer-throttling",
    "--disable-backgrounding-occluded-windows",
    "--disable-renderer-backgrounding",
    "--window-size=800,600",
    "--force-device-scale-factor=1",
    "--lang=en-US",
)
"""Headless, as root in a container (no sandbox, no /dev/shm), background tabs not throttled, one window size
(which elements have a size, and so a ref, depends on the layout)."""
MAX_TABS = int(os.environ.get("AXISRL_MINIWOB_TABS", "16"))
"""Tabs held at once; more live episodes take turns (an evicted episode is replayed on its next step)."""
NO_TIME_LIMIT_MS = 2**31 - 1
"""MiniWoB ends an episode after ``core.EPISODE_MAX_TIME`` of wall time (10-30 s), which an LLM's turns
overrun; its timer is set to the longest ``setTimeout`` delay, so only the step limit bounds an episode."""
DATA_MODE = "train"
"""miniwob's default data mode (some tasks draw their problems by it)."""
READY_ATTEMPTS, READY_SLEEP_S = 40, 0.05
TYPE_MAX_CHARS = 256

READ_PAGE = """
var out = {done: WOB_DONE_GLOBAL, raw_reward: WOB_RAW_REWARD_GLOBAL, reason: WOB_REWARD_REASON};
if (WOB_DONE_GLOBAL) return out;
var utterance = core.getUtterance();
out.utterance = (utterance !== null && typeof utterance === 'object') ? utterance.utterance : utterance;
out.dom = core.getDOMInfo();
out.selects = {};
for (var ref in core.previousDOMInfo) {
  var element = core.previousDOMInfo[ref];
  if (element instanceof HTMLSelectElement) {
    out.selects[ref] = {
      options: Array.prototype.map.call(element.options, function (o) { return o.textContent.trim(); }),
      selected: element.selectedIndex
    };
  }
}
return out;
"""
"""MiniWoB's state after an action: whether the task ended and its raw reward (without the time discount);
while it runs, the utterance, the DOM tree (``getDOMInfo`` also records the refs ``elementClick`` takes) and
each ``select``'s options, which have no size of their own and so no place in the tree."""
START_EPISODE = """
core.EPISODE_MAX_TIME = arguments[0];
Math.seedrandom(arguments[1]);
core.setDataMode(arguments[2]);
core.startEpisodeReal();
"""
SELECT_OPTION = """
var element = core.previousDOMInfo[arguments[0]];
for (var i = 0; i < element.options.length; i++) {
  if (element.options[i].textContent.trim() === arguments[1]) {
    element.selectedIndex = i;
    element.dispatchEvent(new Event('input', {bubbles: true}));
    element.dispatchEvent(new Event('change', {bubbles: true}));
    return true;
  }
}
return 'no such option';
"""


class ChromiumUnavailable(RuntimeError):
    """The headless Chromium or its driver is not installed: MiniWoB cannot run here."""


@dataclass(frozen=True, slots=True)
class ChromiumPaths:
    """The Chromium executable and its chromedriver."""

    browser: str
    driver: str


def chromium_paths() -> ChromiumPaths:
    """Where Chromium and chromedriver are, or ``ChromiumUnavailable`` naming what is missing and how to
    install it."""
    browser = os.environ.get("MINIWOB_CHROME_BINARY") or next(filter(None, map(shutil.which, CHROMIUM_NAMES)), None)
    driver = os.environ.get("MINIWOB_CHROMEDRIVER") or next(filter(None, map(shutil.which, DRIVER_NAMES)), None)
    missing = []
    if not browser or not Path(browser).is_file():
        names = ", ".join(CHROMIUM_NAMES)
        missing.append(f"the Chromium browser (none of {names} on PATH; or set MINIWOB_CHROME_BINARY)")
    if not driver or not Path(driver).is_file():
        missing.append("its driver chromedriver (not on PATH; or set MINIWOB_CHROMEDRIVER)")
    if missing:
        raise ChromiumUnavailable(
            "MiniWoB runs in a headless Chromium, and this machine lacks " + " and ".join(missing) + f"; install both "
            f"with `{INSTALL_HINT}` (Debian) or point the variables at a Chromium and its matching chromedriver"
        )
    return ChromiumPaths(browser, driver)


@dataclass(frozen=True, slots=True)
class Action:
    """One browser action an episode took: ``click`` (ref), ``type`` (ref, text), ``select`` (ref, the
    option's text) or ``press_key`` (text: the key). Episodes keep theirs to be replayed."""

    kind: str
    ref: int | None = None
    text: str | None = None


@dataclass(frozen=True, slots=True)
class PageState:
    """What the page shows after an action: ``done`` once the task has ended (with MiniWoB's raw reward
    and its reason); otherwise the utterance and the compact element list."""

    done: bool
    raw_reward: float | None = None
    reason: str | None = None
    utterance: str | None = None
    elements: tuple[dict[str, Any], ...] = ()


def task_url(task: str) -> str:
    path = HTML_DIR / f"{task}.html"
    if not path.is_file():
        raise ValueError(f"no MiniWoB task {task!r} in the installed miniwob package ({HTML_DIR})")
    return path.as_uri()


def compact_elements(dom: dict[str, Any], selects: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """The element list an agent reads, in document order (see the module docstring). The text pieces
    among an element's children (MiniWoB's pseudo-elements of tag ``t``) become ``{"ref", "text"}``, one
    per run of them, with the ref of the element they are in (clicking it clicks that element)."""
    out: list[dict[str, Any]] = []

    def visit(node: dict[str, Any]) -> None:
        tag = node["tag"].lower()
        takes_input = tag.startswith("input") or tag in ("textarea", "select", "button", "a")
        classes = node.get("classes") if isinstance(node.get("classes"), str) else ""
        icon = node.get("text") == "" and not node["children"] and bool(classes or node.get("id"))
        if node.get("text") or takes_input or icon:
            element: dict[str, Any] = {"ref": node["ref"], "tag": tag}
            if node.get("text"):
                element["text"] = node["text"]
            if "value" in node:
                element["value"] = node["value"]
            select = selects.get(str(node["ref"]))
            if select is not None:
                element["options"] = select["options"]
                element["value"] = select["options"][select["selected"]] if select["selected"] >= 0 else None
            if node.get("id"):
                element["id"] = node["id"]
            if not node.get("text") and classes:
                element["class"] = classes
            if node.get("focused"):
                element["focused"] = True
            out.append(element)
        run: dict[str, Any] | None = None
        for child in node["children"]:
            if child["tag"].lower() == "t":
                if run is None:
                    run = {"ref": node["ref"], "text": child["text"]}
                    out.append(run)
                else:
                    run["text"] += " " + child["text"]
            else:
                run = None
                visit(child)

    visit(dom)
    return tuple(out)


def page_state(raw: dict[str, Any]) -> PageState:
    if raw["done"]:
        return PageState(True, float(raw["raw_reward"]), None if raw["reason"] is None else str(raw["reason"]))
    return PageState(False, utterance=raw["utterance"], elements=compact_elements(raw["dom"], raw["selects"]))


@dataclass(eq=False, slots=True)
class Tab:
    """A browser tab and the episode (its token) whose page it holds, if any."""

    handle: str
    owner: object | None = None
    last_used: int = 0


class Browser:
    """A lazily started headless Chromium whose tabs episodes borrow (see the module docstring). Every
    method but ``close`` expects ``lock`` held."""

    def __init__(self, paths: ChromiumPaths, max_tabs: int = MAX_TABS) -> None:
        self.paths = paths
        self.max_tabs = max_tabs
        self.lock = threading.RLock()
        self.driver: Any = None
        self.tabs: list[Tab] = []
        self.current: Tab | None = None
        self.clock = 0

    def _start(self) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        options.binary_location = self.paths.browser
        for argument in CHROME_ARGUMENTS:
            options.add_argument(argument)
        self.driver = webdriver.Chrome(service=Service(executable_path=self.paths.driver), options=options)
        self.driver.set_script_timeout(30)
        self.tabs = [Tab(self.driver.current_window_handle)]
        self.current = self.tabs[0]

    def attach(self, owner: object) -> bool:
        """Make ``owner``'s tab current: True if it still shows ``owner``'s page, False if ``owner`` got a
        tab that it must load (a free one, a new one, or the one used longest ago, taken from its owner).
        A browser that stopped answering is started again (every episode then rebuilds its page)."""
        from selenium.common.exceptions import WebDriverException

        if self.driver is None:
            self._start()
        try:
            return self._attach(owner)
        except WebDriverException:
            self.close()
            self._start()
            return self._attach(owner)

    def _attach(self, owner: object) -> bool:
        self.clock += 1
        tab = next((t for t in self.tabs if t.owner is owner), None)
        kept = tab is not None
        if tab is None:
            tab = next((t for t in self.tabs if t.owner is None), None)
            if tab is None and len(self.tabs) < self.max_tabs:
                self.driver.switch_to.new_window("tab")
                tab = Tab(self.driver.current_window_handle)
                self.tabs.append(tab)
                self.current = tab
            if tab is None:
                tab = min(self.tabs, key=lambda t: t.last_used)
            tab.owner = owner
        if self.current is not tab:
            self.driver.switch_to.window(tab.handle)
            self.current = tab
        tab.last_used = self.clock
        return kept

    def recover(self) -> None:
        """After an action failed in the browser: quit it if it no longer answers, so that the next use
        starts another (every episode then rebuilds its page)."""
        from selenium.common.exceptions import WebDriverException

        try:
            answers = bool(self.driver.window_handles)
        except WebDriverException:
            answers = False
        if not answers:
            self.close()

    def release(self, owner: object) -> None:
        """Give ``owner``'s tab back (its page is left as it is until the tab is loaded again)."""
        for tab in self.tabs:
            if tab.owner is owner:
                tab.owner = None

    def load(self, task: str, seed: int) -> PageState:
        """Load ``task``'s page afresh in the current tab and start its instance ``seed`` (no time limit)."""
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions
        from selenium.webdriver.support.wait import WebDriverWait

        self.driver.get(task_url(task))
        cover = expected_conditions.presence_of_element_located((By.ID, "sync-task-cover"))
        WebDriverWait(self.driver, 10).until(cover)
        self.driver.execute_script(START_EPISODE, NO_TIME_LIMIT_MS, str(seed), DATA_MODE)
        for _ in range(READY_ATTEMPTS):
            if self.driver.execute_script("return WOB_TASK_READY;"):
                break
            time.sleep(READY_SLEEP_S)
        else:
            raise RuntimeError(f"MiniWoB task {task} did not become ready")
        return self.read()

    def read(self) -> PageState:
        return page_state(self.driver.execute_script(READ_PAGE))

    def perform(self, action: Action) -> PageState:
        """Run one action on the current page and read the page after it. Raises ``ValueError`` when the
        page refuses it (the episode reports it as an error), before anything changed."""
        if action.kind == "click":
            result = self.driver.execute_script("return core.elementClick(arguments[0]);", action.ref)
        elif action.kind == "type":
            result = self.driver.execute_script("return core.elementClick(arguments[0]);", action.ref)
            if result is True:  # clear as a user would (a page that blocks typing blocks this too), then type
                execute_press_key("C-a", self.driver)
                execute_press_key("<Backspace>", self.driver)
                execute_type_text(action.text, self.driver)
        elif action.kind == "select":
            result = self.driver.execute_script(SELECT_OPTION, action.ref, action.text)
        elif action.kind == "press_key":
            execute_press_key(action.text, self.driver)
            result = True
        else:
            raise ValueError(f"unknown action {action.kind!r}")
        if result is not True:
            raise ValueError(str(result))
        return self.read()

    def restore(self, task: str, seed: int, actions: Sequence[Action]) -> PageState:
        """Instance ``seed`` of ``task`` after ``actions``, rebuilt in the current tab."""
        state = self.load(task, seed)
        for action in actions:
            state = self.perform(action)
        return state

    def close(self) -> None:
        """Quit the browser (a later use starts another)."""
        with self.lock:
            driver, self.driver, self.tabs, self.current = self.driver, None, [], None
            if driver is not None:
                try:
                    driver.quit()
                except Exception as error:  # a browser that died cannot quit; its driver process is gone or going
                    log.warning("quitting the MiniWoB browser failed: %s", error)


_shared: tuple[int, Browser] | None = None
_shared_lock = threading.Lock()


def shared_browser() -> Browser:
    """This process's browser (a forked child gets its own; the parent's is closed at exit)."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared[0] != os.getpid():
            browser = Browser(chromium_paths())
            _shared = (os.getpid(), browser)
            atexit.register(_close_if_owner, os.getpid(), browser)
        return _shared[1]


def _close_if_owner(pid: int, browser: Browser) -> None:
    if os.getpid() == pid:
        browser.close()


@contextmanager
def borrowed(owner: object) -> Iterator[tuple[Browser, bool]]:
    """The shared browser, locked, with ``owner``'s tab current; the flag says whether the tab still
    shows ``owner``'s page."""
    browser = shared_browser()
    with browser.lock:
        yield browser, browser.attach(owner)
