/* The runs list's "Compare selected" (docs/compare.md): a checkbox per row
 * ([data-compare-pick], its value the run id); the button ([data-compare-button]) is
 * enabled while exactly two are ticked and opens the compare page with the first ticked
 * as a and the second as b. Rows the live stream replaces keep their tick.
 */
(function () {
  "use strict";

  const picked = [];

  function button() { return document.querySelector("[data-compare-button]"); }

  function sync() {
    const go = button();
    if (!go) { return; }
    document.querySelectorAll("input[data-compare-pick]").forEach(function (box) {
      box.checked = picked.indexOf(box.value) !== -1;
    });
    go.disabled = picked.length !== 2;
    const count = document.querySelector("[data-compare-count]");
    if (count) {  // the same boxes choose runs for the bulk actions: any number
      count.textContent = picked.length > 2 ? "tick exactly two to compare" : picked.length + " of 2 ticked";
    }
  }

  document.addEventListener("change", function (event) {
    const box = event.target.closest("input[data-compare-pick]");
    if (!box) { return; }
    const at = picked.indexOf(box.value);
    if (box.checked && at === -1) { picked.push(box.value); }
    if (!box.checked && at !== -1) { picked.splice(at, 1); }
    sync();
  });

  document.addEventListener("click", function (event) {
    const go = event.target.closest("[data-compare-button]");
    if (!go || picked.length !== 2) { return; }
    const query = new URLSearchParams({ a: picked[0], b: picked[1] });
    window.location.assign(go.dataset.compareUrl + "?" + query.toString());
  });

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("input[data-compare-pick]:checked").forEach(function (box) {
      if (picked.indexOf(box.value) === -1) { picked.push(box.value); }
    });
    const rows = document.querySelector("[data-run-rows]");
    if (rows) { new MutationObserver(sync).observe(rows, { childList: true }); }
    sync();
  });
})();
