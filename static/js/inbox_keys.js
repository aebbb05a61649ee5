/* Approvals inbox keyboard shortcuts (loaded by templates/runs/inbox.html only).
 * Active only when #inbox-list exists and focus is not in a text field:
 *   j / k   move focus between ticket rows (the focused row is marked .selected)
 *   x/space toggle the focused row's checkbox
 *   a / r   approve / reject: the focused row's ticket if nothing is checked (posted to the
 *           bulk endpoint with confirm=1; a ticket someone else has claimed asks first, with
 *           the row's server-rendered data-claim-confirm), else open the bulk confirmation
 *           (it has the reason field) for the checked tickets
 *   e       open the run page at the ticket (<run-url>#ticket-<pk>) to edit or answer it
 *   Escape  close the confirmation
 * Focus is re-applied after a live refresh (awaken:refreshed) or a swap of the list.
 * The server checks permission and CSRF on every request whatever this script does.
 */
(function () {
  "use strict";

  let current = null;       // ticket id of the focused/selected row
  let currentIndex = -1;    // its position, to land on the next row once it is decided

  function list() { return document.getElementById("inbox-list"); }
  function bulkForm() { return document.getElementById("inbox-bulk-form"); }
  function rows() {
    const panel = list();
    return panel ? Array.from(panel.querySelectorAll("tr[data-ticket-id]")) : [];
  }
  function rowFor(id) { return id ? document.getElementById("ticket-row-" + id) : null; }

  function typing(el) {
    if (!el || el === document.body) { return false; }
    if (el.isContentEditable || el.tagName === "TEXTAREA" || el.tagName === "SELECT") { return true; }
    if (el.tagName === "INPUT") { return !/^(checkbox|radio|button|submit|reset)$/i.test(el.type); }
    return false;
  }

  function mark(row, focus) {
    const all = rows();
    all.forEach(function (r) { r.classList.toggle("selected", r === row); });
    if (!row) { return; }
    current = row.dataset.ticketId;
    currentIndex = all.indexOf(row);
    if (focus) { row.focus(); }
  }

  function focusedRow() {
    const active = document.activeElement;
    const row = active && active.closest ? active.closest("tr[data-ticket-id]") : null;
    const panel = list();
    if (row && panel && panel.contains(row)) { return row; }
    return rowFor(current);
  }

  function move(delta) {
    const all = rows();
    if (!all.length) { return; }
    const at = all.indexOf(focusedRow());
    const next = at < 0 ? 0 : Math.max(0, Math.min(all.length - 1, at + delta));
    mark(all[next], true);
  }

  function toggle() {
    const row = focusedRow();
    const box = row ? row.querySelector("input[type=checkbox][name=ticket]") : null;
    if (box) { box.checked = !box.checked; }
  }

  function decide(action) {
    const form = bulkForm();
    if (!form || !window.htmx) { return; }  // no decide permission: no controls
    if (form.querySelector("input[name=ticket]:checked")) {
      const button = form.querySelector("button[name=action][value=" + action + "]");
      if (button) { button.click(); }  // htmx posts the form: the confirmation opens
      return;
    }
    const row = focusedRow();
    if (!row) { return; }
    if (row.dataset.claimConfirm && !window.confirm(row.dataset.claimConfirm)) { return; }
    window.htmx.ajax("POST", form.getAttribute("action"), {
      source: list(),
      target: "#inbox-list",
      swap: "innerHTML",
      values: {
        ticket: row.dataset.ticketId,
        action: action,
        confirm: "1",
        agent: form.elements.agent ? form.elements.agent.value : "",
        tool: form.elements.tool ? form.elements.tool.value : "",
        who: form.elements.who ? form.elements.who.value : "",
      },
    });
  }

  function edit() {
    const row = focusedRow();
    if (row && row.dataset.runUrl) {
      window.location.href = row.dataset.runUrl + "#ticket-" + row.dataset.ticketId;
    }
  }

  function closeConfirmation() {
    const box = document.getElementById("inbox-confirm");
    if (!box || !box.firstElementChild) { return false; }
    box.innerHTML = "";
    const row = rowFor(current);
    if (row) { row.focus(); }
    return true;
  }

  function restore() {
    const all = rows();
    let row = rowFor(current);
    if (!row && currentIndex >= 0 && all.length) { row = all[Math.min(currentIndex, all.length - 1)]; }
    if (!row) { return; }
    const active = document.activeElement;
    const lost = !active || active === document.body || (list() && list().contains(active));
    mark(row, lost);  // do not steal focus from the reason field or the filters
  }

  document.addEventListener("keydown", function (event) {
    if (!list()) { return; }
    if (event.key === "Escape" && closeConfirmation()) { event.preventDefault(); return; }
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) { return; }
    // space only on the row itself: a checkbox, a link or a <summary> keeps its own meaning
    const onRow = event.target && event.target.matches && event.target.matches("tr[data-ticket-id]");
    switch (event.key) {
      case "j": move(1); break;
      case "k": move(-1); break;
      case "x": toggle(); break;
      case " ": if (!onRow) { return; } toggle(); break;
      case "a": decide("approve"); break;
      case "r": decide("reject"); break;
      case "e": edit(); break;
      default: return;
    }
    event.preventDefault();
  });

  document.addEventListener("focusin", function (event) {
    const row = event.target.closest ? event.target.closest("tr[data-ticket-id]") : null;
    if (row && list() && list().contains(row)) { mark(row, false); }
  });

  document.addEventListener("click", function (event) {
    const cancel = event.target.closest ? event.target.closest("[data-inbox-cancel]") : null;
    if (cancel && list()) { event.preventDefault(); closeConfirmation(); }
  });

  document.addEventListener("awaken:refreshed", function (event) {
    if (event.target && event.target.id === "inbox-list") { restore(); }
  });
  document.addEventListener("htmx:afterSwap", function (event) {
    if (event.detail && event.detail.target && event.detail.target.id === "inbox-list") { restore(); }
  });
})();
