/* Approvals inbox keyboard shortcuts (loaded by runs/decisions/templates/runs/inbox.html only).
 * Active only when #inbox-list exists and focus is not in a text field:
 *   j / k   move focus between ticket rows (the focused row is marked .selected)
 *   x/space toggle the focused row's checkbox
 *   a / r   approve / reject. With tickets checked: open the bulk confirmation (it has the
 *           reason field; it is the confirmation, so no undo window). Otherwise the focused
 *           row's ticket, after an undo window: the row shows "Approving in 5 s… Undo" counting
 *           down, focus moves on to the next row, and when the window ends the decision is
 *           posted to the bulk endpoint with confirm=1, as a click on "Confirm" would. The
 *           window's length is #inbox-list's data-undo-seconds (from the server; 0 sends at
 *           once). Approving a ticket that needs an answer is refused here (answer it on the
 *           run page). A ticket someone else has claimed asks first, with the row's
 *           server-rendered data-claim-confirm.
 *   u       undo a pending decision: the focused row's, else the latest one
 *   e       open the run page at the ticket (<run-url>#ticket-<pk>) to edit or answer it
 *   Escape  close the confirmation; else undo like u; else close the result message
 * Leaving the page (pagehide: a link, reload, closing the tab) sends the pending decisions
 * at once (fetch keepalive, without waiting for their windows): the key press was the
 * decision, the window only a way back. The result shows as a message on the next page of
 * the site when it arrives first. A decision that cannot be sent (network, refused) is
 * reported in #inbox-undo-status and its ticket keeps waiting: nothing is dropped silently.
 * Focus is re-applied after a live refresh (awaken:refreshed) or a swap of the list, and so
 * are the countdowns of the rows still pending.
 * The server checks permission and CSRF on every request whatever this script does.
 */
(function () {
  "use strict";

  const DEFAULT_UNDO_SECONDS = 5;
  const VERB = { approve: "Approving", reject: "Rejecting" };
  const DONE = { approve: "approved", reject: "rejected" };
  const FIELDS = ["csrfmiddlewaretoken", "agent", "tool", "waiting_longer_than", "sort", "who"];

  let current = null;       // ticket id of the focused/selected row
  let currentIndex = -1;    // its position, to land on the next row once it is decided
  const pending = new Map();  // ticket id -> decision waiting for its undo window to end
  const inFlight = new Map(); // ticket id -> decision sent, its answer not yet in
  let order = 0;            // the latest pending decision has the highest order
  let ticker = null;        // repaints the countdowns while any is pending

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
    if (box && !box.disabled) { box.checked = !box.checked; }  // a frozen team's: disabled
  }

  // --- messages -----------------------------------------------------------------------------

  function say(text, alarm) {
    const status = document.getElementById("inbox-undo-status");
    if (!status) { return; }
    status.textContent = text;
    status.classList.toggle("error", Boolean(alarm));
  }

  // The text of a server answer (HTML): parsed inert, never inserted.
  function textOf(html) {
    const text = new DOMParser().parseFromString(html, "text/html").body.textContent || "";
    return text.replace(/\s+/g, " ").trim().slice(0, 200);
  }

  // --- sending decisions --------------------------------------------------------------------

  function undoSeconds() {
    const panel = list();
    const value = panel ? parseFloat(panel.dataset.undoSeconds) : NaN;
    return isNaN(value) ? DEFAULT_UNDO_SECONDS : Math.max(0, value);
  }

  // Where a decision goes and with which fields, read when the key is pressed: the list
  // (and its form) may be gone by the time the window ends.
  function formTarget(form) {
    const fields = {};
    FIELDS.forEach(function (name) {
      const field = form.elements[name];
      fields[name] = field ? field.value : "";
    });
    return { url: form.getAttribute("action"), fields: fields };
  }

  function formBody(target, ids, action) {
    const data = new FormData();
    Object.keys(target.fields).forEach(function (name) { data.append(name, target.fields[name]); });
    ids.forEach(function (id) { data.append("ticket", id); });
    data.append("action", action);
    data.append("confirm", "1");
    return data;
  }

  // Posts the decision as the list's htmx form would and puts the answer (the list, with
  // the result out of band) in place. keepalive: a page left meanwhile still sends it.
  function send(target, ids, action, tools) {
    const request = {
      method: "POST",
      body: formBody(target, ids, action),
      headers: { "HX-Request": "true" },
      credentials: "same-origin",
      keepalive: true,
    };
    return fetch(target.url, request).then(function (response) {
      return response.text().then(function (html) {
        if (!response.ok) { throw new Error(textOf(html) || "the server answered " + response.status); }
        ids.forEach(function (id) { inFlight.delete(id); });
        say("", false);  // the answer's result message (in #inbox-confirm) tells what happened
        const panel = list();
        if (panel && window.htmx) { window.htmx.swap(panel, html, { swapStyle: "innerHTML" }); }
        restore();
      });
    }).catch(function (error) {
      ids.forEach(function (id) { inFlight.delete(id); unpaint(rowFor(id)); });
      say("Not " + DONE[action] + ": " + tools.join(", ") + " (" + error.message + "). It still waits.", true);
    });
  }

  // --- the undo window ----------------------------------------------------------------------

  // A pending decision's note: its countdown and Undo; once sent, "Approving…" alone.
  function paint(entry) {
    const row = rowFor(entry.id);
    if (!row) { return; }
    let note = row.querySelector(".undo-note");
    if (note && entry.sent) {
      note.querySelector(".undo-text").textContent = VERB[entry.action] + "…";
      Array.from(note.querySelectorAll("button, .muted")).forEach(function (part) { part.remove(); });
      return;
    }
    if (!note) {
      note = document.createElement("p");
      note.className = "undo-note small";
      const text = document.createElement("b");
      text.className = "undo-text";
      const button = document.createElement("button");
      button.type = "button";
      button.className = "undo";
      button.dataset.undoTicket = entry.id;
      button.textContent = "Undo";
      const keys = document.createElement("span");
      keys.className = "muted";
      keys.textContent = " u or Esc · leaving the page sends it now";
      note.append(text, " ", button, keys);
      (row.querySelector(".inbox-tool") || row.lastElementChild).prepend(note);
    }
    row.classList.add("undo-pending");
    note.dataset.action = entry.action;
    if (entry.sent) { paint(entry); return; }
    const left = Math.max(0, Math.ceil((entry.deadline - Date.now()) / 1000));
    note.querySelector(".undo-text").textContent = VERB[entry.action] + " in " + left + " s…";
  }

  function unpaint(row) {
    if (!row) { return; }
    row.classList.remove("undo-pending");
    const note = row.querySelector(".undo-note");
    if (note) { note.remove(); }
  }

  // The rows' notes follow `pending` and `inFlight`: after a refresh or a swap, and on
  // return to the page.
  function repaint() {
    rows().forEach(function (row) {
      const id = row.dataset.ticketId;
      if (!pending.has(id) && !inFlight.has(id)) { unpaint(row); }
    });
    pending.forEach(paint);
    inFlight.forEach(paint);
  }

  function tick() {
    if (pending.size && ticker === null) {
      ticker = setInterval(function () { pending.forEach(paint); }, 200);
    } else if (!pending.size && ticker !== null) {
      clearInterval(ticker);
      ticker = null;
    }
  }

  function schedule(row, action, target, seconds) {
    const id = row.dataset.ticketId;
    const before = pending.get(id);
    if (before) { clearTimeout(before.timer); }  // a second key on the row replaces its decision
    const entry = {
      id: id,
      action: action,
      tool: row.dataset.tool || "ticket",
      target: target,
      deadline: Date.now() + seconds * 1000,
      order: ++order,
      timer: setTimeout(function () { commit(id); }, seconds * 1000),
    };
    pending.set(id, entry);
    paint(entry);
    tick();
    say(VERB[action] + " " + entry.tool + " in " + seconds + " s: u or Esc undoes it.", false);
  }

  function commit(id) {
    const entry = pending.get(id);
    if (!entry) { return; }
    pending.delete(id);
    tick();
    entry.sent = true;
    inFlight.set(id, entry);
    paint(entry);
    send(entry.target, [id], entry.action, [entry.tool]);
  }

  function undoTarget() {
    const row = focusedRow();
    if (row && pending.has(row.dataset.ticketId)) { return row.dataset.ticketId; }
    let latest = null;
    pending.forEach(function (entry) { if (!latest || entry.order > latest.order) { latest = entry; } });
    return latest ? latest.id : null;
  }

  function undo(id) {
    const entry = id ? pending.get(id) : null;
    if (!entry) { return false; }
    clearTimeout(entry.timer);
    pending.delete(id);
    tick();
    const row = rowFor(id);
    unpaint(row);
    if (row) { mark(row, true); }
    say("Undone: " + entry.tool + " was not " + DONE[entry.action] + "; it still waits.", false);
    return true;
  }

  // Leaving the page sends what is pending now, one request per action.
  function flush() {
    if (!pending.size) { return; }
    const groups = {};
    pending.forEach(function (entry) {
      clearTimeout(entry.timer);
      const group = groups[entry.action] || (groups[entry.action] = { target: entry.target, ids: [] });
      group.ids.push(entry.id);
    });
    pending.clear();
    tick();
    Object.keys(groups).forEach(function (action) {
      const group = groups[action];
      fetch(group.target.url, {
        method: "POST",
        body: formBody(group.target, group.ids, action),
        credentials: "same-origin",
        keepalive: true,
        redirect: "manual",  // the answer sets the message the next page shows; do not read it here
      }).catch(function () {});
    });
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
    if (row.dataset.frozen) {  // the team is frozen: said before anything is sent
      say(row.dataset.frozen, true);
      return;
    }
    if (action === "approve" && row.hasAttribute("data-respond-only")) {
      say((row.dataset.tool || "This ticket") + " needs an answer: press e to answer it on the run page, or r to reject it.", true);
      return;
    }
    if (row.dataset.claimConfirm && !window.confirm(row.dataset.claimConfirm)) { return; }
    const target = formTarget(form);
    const seconds = undoSeconds();
    if (seconds <= 0) {
      send(target, [row.dataset.ticketId], action, [row.dataset.tool || "ticket"]);
      return;
    }
    schedule(row, action, target, seconds);
    const all = rows();
    const at = all.indexOf(row);
    if (at >= 0 && at + 1 < all.length) { mark(all[at + 1], true); }
  }

  function edit() {
    const row = focusedRow();
    if (row && row.dataset.runUrl) {
      window.location.href = row.dataset.runUrl + "#ticket-" + row.dataset.ticketId;
    }
  }

  // `formOnly`: close the bulk confirmation only, not a result message
  function closeConfirmation(formOnly) {
    const box = document.getElementById("inbox-confirm");
    if (!box || !box.firstElementChild) { return false; }
    if (formOnly && !box.querySelector("form")) { return false; }
    box.innerHTML = "";
    const row = rowFor(current);
    if (row) { row.focus(); }
    return true;
  }

  function restore() {
    repaint();
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
    if (event.key === "Escape") {
      if (closeConfirmation(true) || undo(undoTarget()) || closeConfirmation(false)) { event.preventDefault(); }
      return;
    }
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
      case "u": if (!undo(undoTarget())) { return; } break;
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
    const undoButton = event.target.closest ? event.target.closest("[data-undo-ticket]") : null;
    if (undoButton && list()) { event.preventDefault(); undo(undoButton.dataset.undoTicket); return; }
    const cancel = event.target.closest ? event.target.closest("[data-inbox-cancel]") : null;
    if (cancel && list()) { event.preventDefault(); closeConfirmation(false); }
  });

  document.addEventListener("awaken:refreshed", function (event) {
    if (event.target && event.target.id === "inbox-list") { restore(); }
  });
  document.addEventListener("htmx:afterSwap", function (event) {
    if (event.detail && event.detail.target && event.detail.target.id === "inbox-list") { restore(); }
  });
  window.addEventListener("pagehide", flush);
  window.addEventListener("pageshow", function (event) { if (event.persisted) { repaint(); } });
})();
