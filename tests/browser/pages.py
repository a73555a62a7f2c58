"""What the browser tests do on admin pages, and how they read the API behind them."""

import base64
import json
import urllib.request

from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import Select, WebDriverWait


def click_and_wait(page: WebDriver, element: WebElement, timeout: float = 10) -> None:
    """Click something that loads a new page, and return once the old page is gone and the new one loaded."""
    old = page.find_element(By.TAG_NAME, "html")
    element.click()
    wait = WebDriverWait(page, timeout)
    wait.until(lambda driver: _gone(old))
    wait.until(lambda driver: driver.execute_script("return document.readyState") == "complete")


def _gone(element: WebElement) -> bool:
    """staleness_of, plus the answer chromedriver gives while the old document is being torn down ("Node with given
    id does not belong to the document"), which staleness_of lets through as an error."""
    try:
        return expected_conditions.staleness_of(element)(None)
    except WebDriverException as exc:
        if "does not belong to the document" in str(exc):
            return True
        raise


def changelist_rows(page: WebDriver) -> dict[int, str]:
    """The rows of an admin change list: primary key -> the row's text."""
    rows = page.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")
    return {
        int(row.find_element(By.CSS_SELECTOR, "input.action-select").get_attribute("value")): row.text for row in rows
    }


def run_action(page: WebDriver, ids: list[int], label: str) -> str:
    """On a change list, tick the rows of `ids`, run the action shown as `label`, and return the messages after."""
    for pk in ids:
        page.find_element(By.CSS_SELECTOR, f"input.action-select[value='{pk}']").click()
    Select(page.find_element(By.NAME, "action")).select_by_visible_text(label)
    click_and_wait(page, page.find_element(By.CSS_SELECTOR, "#changelist-form button[name=index]"))
    return page.find_element(By.CSS_SELECTOR, "ul.messagelist").text


def api_get(base_url: str, key: str, path: str) -> dict:
    """GET an API path with a tenant's key; the JSON answer."""
    request = urllib.request.Request(base_url + path, headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


# The review console (/admin/review/): its keyboard, its items, and the pictures of it in docs/review.md.


def press(page: WebDriver, *keys: str) -> None:
    """Type keys into whatever has the focus, as a person at the keyboard would (no element is clicked)."""
    ActionChains(page).send_keys(*keys).perform()


def press_ctrl(page: WebDriver, key: str) -> None:
    """Ctrl+`key` into whatever has the focus."""
    ActionChains(page).key_down(Keys.CONTROL).send_keys(key).key_up(Keys.CONTROL).perform()


def focused_fact(page: WebDriver) -> int | None:
    """The id of the queue item that has the focus (None when the focus is not on an item)."""
    value = page.switch_to.active_element.get_attribute("data-fact")
    return int(value) if value else None


def queue_item(page: WebDriver, fact_id: int) -> WebElement:
    return page.find_element(By.CSS_SELECTOR, f"article.review-item[data-fact='{fact_id}']")


def queue_ids(page: WebDriver) -> list[int]:
    """The facts of the queue page, in their order (read at once: none is not waited for as find_elements would)."""
    script = "return Array.from(document.querySelectorAll('article.review-item'), item => item.dataset.fact);"
    return [int(value) for value in page.execute_script(script)]


def count(page: WebDriver, selector: str) -> int:
    """How many elements match `selector` now: unlike find_elements, it does not wait the implicit wait for one."""
    return page.execute_script("return document.querySelectorAll(arguments[0]).length;", selector)


def wait_until_decided(page: WebDriver, fact_id: int, timeout: float = 10) -> str:
    """Wait until the console marked a queue item decided (its fetch answered); its result text."""
    item = queue_item(page, fact_id)
    WebDriverWait(page, timeout).until(lambda driver: "review-done" in item.get_attribute("class"))
    return item.find_element(By.CSS_SELECTOR, ".review-result").text


def messages(page: WebDriver) -> str:
    """The admin's messages shown after a redirect."""
    return page.find_element(By.CSS_SELECTOR, "ul.messagelist").text


def save_cropped_png(page: WebDriver, path, width: int = 1200, bottom: str = "#content") -> None:
    """Save a PNG of the whole page however long, `width` CSS pixels wide at device scale 1, cut just below the
    `bottom` element (the footer's empty space left out): for the pictures in docs/review.md. The window is made as tall
    as the page for it (so nothing is drawn beyond the viewport), then given back its size."""
    size = page.get_window_size()
    chrome = size["height"] - page.execute_script("return window.innerHeight;")
    try:
        page.set_window_size(width, 900)
        height = page.execute_script("return document.documentElement.scrollHeight;")
        page.set_window_size(width, height + chrome)
        box = page.execute_script(
            "const r = document.querySelector(arguments[0]).getBoundingClientRect();"
            "return {bottom: r.bottom + window.scrollY, width: document.documentElement.clientWidth};",
            bottom,
        )
        clip = {"x": 0, "y": 0, "width": min(box["width"], width), "height": box["bottom"] + 16, "scale": 1}
        shot = page.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "clip": clip})
    finally:
        page.set_window_size(size["width"], size["height"])
    path.write_bytes(base64.b64decode(shot["data"]))
