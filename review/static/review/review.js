// The review queue's keyboard: one key per decision. Decisions go to the same endpoint as the buttons (which work
// without this script), through fetch, and the decided fact is marked done in place.
(function () {
  "use strict";
  const queue = document.getElementById("review-queue");
  if (!queue) return;
  const canDecide = queue.dataset.canDecide === "1";
  const items = () => Array.from(queue.querySelectorAll(".review-item"));
  const help = document.getElementById("review-help");
  let current = 0;

  function focus(index) {
    const all = items();
    if (!all.length) return;
    current = Math.max(0, Math.min(index, all.length - 1));
    all[current].focus();
    all[current].scrollIntoView({ block: "nearest" });
  }

  function currentItem() {
    const all = items();
    const focused = document.activeElement && document.activeElement.closest(".review-item");
    if (focused) current = all.indexOf(focused);  // the item a click focused, or holding the focused control
    return all[current];
  }

  function move(step) {
    const item = currentItem();
    focus(item ? items().indexOf(item) + step : 0);
  }

  // Keys typed into these are text, not shortcuts; a checkbox or a button still lets the keys through.
  function typing(target) {
    return target.isContentEditable || target.matches("textarea, select, input:not([type=checkbox]):not([type=radio])");
  }

  function csrfToken(form) {
    return form.querySelector("input[name=csrfmiddlewaretoken]").value;
  }

  async function decide(item, decision) {
    if (!item || !canDecide || item.classList.contains("review-done") || item.dataset.busy) return;
    item.dataset.busy = "1";  // one decision at a time: a second key press would post it twice
    const form = item.querySelector("form.review-decision");
    const data = new FormData(form);
    data.set("decision", decision);
    const result = item.querySelector(".review-result");
    result.textContent = "…";
    result.classList.remove("review-error");
    try {
      const response = await fetch(form.action, {
        method: "POST", body: data, headers: { Accept: "application/json", "X-CSRFToken": csrfToken(form) },
        credentials: "same-origin",
      });
      const body = await response.json();
      const outcome = body.results ? body.results[item.dataset.fact] : { ok: false, error: body.error };
      if (outcome && outcome.ok) {
        result.textContent = decision === "reject" ? "rejected" : "approved";
        item.classList.add("review-done");
        item.querySelector(".review-editor").hidden = true;
        if (outcome.content) item.querySelector(".review-content").textContent = outcome.content;  // as saved
        const box = item.querySelector(".review-select");
        if (box) { box.checked = false; box.disabled = true; countSelected(); }  // decided: out of bulk decisions
        const total = document.getElementById("review-total");
        const left = Math.max(0, parseInt(total.textContent, 10) - 1);
        total.textContent = left;
        document.getElementById("review-total-noun").textContent = left === 1 ? "pending fact" : "pending facts";
        focus(items().indexOf(item) + 1);
      } else {
        result.textContent = (outcome && outcome.error) || "failed";
        result.classList.add("review-error");
      }
    } catch (error) {
      result.textContent = "failed: " + error;
      result.classList.add("review-error");
    } finally {
      delete item.dataset.busy;
    }
  }

  function edit(item) {
    if (!item || !canDecide || item.classList.contains("review-done")) return;
    const editor = item.querySelector(".review-editor");
    editor.hidden = false;
    const text = editor.querySelector("textarea");
    text.focus();
    text.setSelectionRange(text.value.length, text.value.length);
  }

  function toggleSelect(item) {
    const box = item && item.querySelector(".review-select");
    if (!box || box.disabled) return;
    box.checked = !box.checked;
    countSelected();
  }

  function countSelected() {
    const count = document.getElementById("review-selected-count");
    if (count) count.textContent = queue.querySelectorAll(".review-select:checked").length;
  }

  queue.addEventListener("change", (event) => { if (event.target.matches(".review-select")) countSelected(); });
  queue.addEventListener("click", (event) => {
    const item = event.target.closest(".review-item");
    if (event.target.closest(".review-edit")) { edit(item); return; }  // the button, or the <kbd> inside it
    const button = event.target.closest("button[name=decision]");
    if (button && item && button.closest("form.review-decision")) {
      event.preventDefault();
      decide(item, button.value);
    }
  });

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) {
      if (event.key === "Enter" && event.target.matches(".review-editor textarea")) {
        event.preventDefault();
        decide(event.target.closest(".review-item"), "edit_approve");
      }
      return;
    }
    if (event.key === "Escape") {
      help.hidden = true;
      const editor = event.target.closest(".review-editor");
      if (editor) { editor.hidden = true; focus(items().indexOf(editor.closest(".review-item"))); }
      return;
    }
    if (typing(event.target)) return;  // typing, not deciding
    const actions = {
      j: () => move(1), k: () => move(-1),
      a: () => decide(currentItem(), "approve"), r: () => decide(currentItem(), "reject"),
      e: () => edit(currentItem()), x: () => toggleSelect(currentItem()),
      "?": () => { help.hidden = !help.hidden; },
    };
    const action = actions[event.key];
    if (action) { event.preventDefault(); action(); }
  });

  if (items().length) focus(0);
})();
