/* Small actions shared by the operator pages (loaded by templates/base.html):
 *  - a button with data-confirm="question" submits only if the operator confirms;
 *  - a [data-dismiss] inside a decision outcome (.outcome) removes that outcome, which
 *    otherwise stays until the operator dismisses it.
 */
(function () {
  "use strict";

  document.addEventListener("click", function (event) {
    const button = event.target.closest("[data-confirm]");
    if (button && !window.confirm(button.dataset.confirm)) { event.preventDefault(); }
    const dismiss = event.target.closest("[data-dismiss]");
    const outcome = dismiss ? dismiss.closest(".outcome") : null;
    if (outcome) { outcome.remove(); }
  });
})();

/* Run control on the thread page:
 *  - a composer's mode select ([data-mode-select]): the parts of its form for one mode
 *    ([data-mode-only="mode"]) are shown, and take part in the form, only while that
 *    mode is chosen;
 *  - a live panel marked [data-hold-while-editing] is not replaced while one of its
 *    editors (<details>) is open, so what the operator types is kept; it refetches once
 *    the editor closes.
 */
(function () {
  "use strict";

  function syncModeParts(select) {
    if (!select.form) { return; }
    select.form.querySelectorAll("[data-mode-only]").forEach(function (part) {
      const off = part.dataset.modeOnly !== select.value;
      part.hidden = off;
      part.disabled = off;
    });
  }

  document.addEventListener("change", function (event) {
    const select = event.target.closest("select[data-mode-select]");
    if (select) { syncModeParts(select); }
  });
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("select[data-mode-select]").forEach(syncModeParts);
  });

  document.addEventListener("htmx:beforeSwap", function (event) {
    const target = event.detail.target;
    if (target && target.matches("[data-hold-while-editing]") && target.querySelector("details[open]")) {
      event.detail.shouldSwap = false;
      target.dataset.stale = "true";
    }
  });
  // "toggle" does not bubble: listen while it goes down
  document.addEventListener("toggle", function (event) {
    const panel = event.target.closest ? event.target.closest("[data-hold-while-editing]") : null;
    if (!panel || panel.dataset.stale !== "true" || panel.querySelector("details[open]")) { return; }
    delete panel.dataset.stale;
    if (window.htmx && panel.dataset.refreshUrl) {
      window.htmx.ajax("GET", panel.dataset.refreshUrl, { source: panel, target: panel, swap: "innerHTML" });
    }
  }, true);
})();
