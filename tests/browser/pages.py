"""What the browser tests do on admin pages, and how they read the API behind them."""

import json
import urllib.request

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import Select, WebDriverWait


def click_and_wait(page: WebDriver, element: WebElement, timeout: float = 10) -> None:
    """Click something that loads a new page, and return once the old page is gone and the new one loaded."""
    old = page.find_element(By.TAG_NAME, "html")
    element.click()
    wait = WebDriverWait(page, timeout)
    wait.until(expected_conditions.staleness_of(old))
    wait.until(lambda driver: driver.execute_script("return document.readyState") == "complete")


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
