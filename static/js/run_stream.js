/* Live updates over websockets. One module, two uses:
 *  - a run page (#run-page): ws/runs/<id>/?after_seq=N replays persisted events after N
 *    (the page rendered 1..N) then streams live; rows arrive as server-rendered, escaped
 *    HTML, one per `event` frame or several in one `events` frame when the run is busy;
 *    duplicates (seq <= last) are dropped; reconnects with jittered backoff from the
 *    last seq (at once when the browser comes back online); token deltas are shown with
 *    textContent only.
 *  - list pages ([data-live]): ws/dashboard/ says which run changed; the page refetches
 *    that run's row (the same partial the page rendered) and, at most once per
 *    PANEL_REFRESH_MS, its panels (the inbox list); the dashboard's figures are pushed
 *    by the server (ws/dashboard/?figures=1), rendered once per process for every tab.
 */
(function () {
  "use strict";

  function backoff(attempt) {
    const ceiling = Math.min(10000, 400 * Math.pow(2, attempt));
    return ceiling / 2 + Math.random() * (ceiling / 2);
  }

  function wsUrl(path) {
    return (location.protocol === "https:" ? "wss://" : "ws://") + location.host + path;
  }

  const FINAL_CODES = new Set([4401, 4403, 4404]);

  function keepAlive(path, onMessage, status) {
    let attempt = 0;
    let retry = null;  // the planned reconnect while the socket is down
    const state = { socket: null };
    function connect() {
      retry = null;
      const socket = new WebSocket(wsUrl(path()));
      state.socket = socket;
      window.__awakenSocket = socket;
      socket.onopen = function () { attempt = 0; status("live", false); };
      socket.onmessage = function (message) { onMessage(JSON.parse(message.data), socket); };
      socket.onclose = function (event) {
        if (FINAL_CODES.has(event.code)) { status("closed (" + event.code + ")", true); return; }
        status("reconnecting…", true);
        retry = setTimeout(connect, backoff(attempt++));
      };
    }
    // Back online: the failed attempts were the network's fault, so reconnect now instead
    // of after the back-off they built up (up to 10 s of a page that looks live but is not).
    window.addEventListener("online", function () {
      if (retry === null) { return; }  // open, connecting, or closed for good
      clearTimeout(retry);
      attempt = 0;
      connect();
    });
    connect();
    return state;
  }

  function debounce(fn, ms) {
    let timer = null;
    return function () { clearTimeout(timer); timer = setTimeout(fn, ms); };
  }

  // At most one call per `ms`, never sooner than `delay` (plus up to `jitter`) after the
  // first request, so a burst of changes becomes one call, and always one after the last
  // request, so the last change is shown. A debounce would never fire while changes keep
  // coming. The jitter spreads the tabs that all heard the same change at once.
  function throttle(fn, ms, delay, jitter) {
    let last = -Infinity;
    let timer = null;
    return function () {
      if (timer !== null) { return; }  // the call already planned will show this change
      const wait = Math.max(delay + Math.random() * jitter, last + ms - Date.now());
      timer = setTimeout(function () { timer = null; last = Date.now(); fn(); }, wait);
    };
  }

  // Every open dashboard refetches its figures on changes: with many tabs and busy runs
  // that was one request per change per tab.
  const PANEL_REFRESH_MS = 2500;
  const PANEL_REFRESH_DELAY_MS = 400;
  const PANEL_REFRESH_JITTER_MS = 1000;

  // Each panel is its own request source: htmx.ajax without one uses <body>, and htmx
  // keeps only the last request queued behind an in-flight one per source, so refreshing
  // several panels at once would silently drop all but the first and the last.
  function refreshInto(id, url) {
    const target = document.getElementById(id);
    if (target && url && window.htmx) {
      window.htmx.ajax("GET", url, { source: target, target: target, swap: "innerHTML" });
    }
  }

  const PANEL_EVENTS = new Set(["run_start", "step_end", "tool_call_done", "tool_call_resumed",
    "ticket_decided", "run_finish", "error"]);
  const TICKET_EVENTS = new Set(["run_start", "tool_call_done", "ticket_decided", "run_finish", "error"]);

  function runPage(page) {
    const timeline = document.getElementById("run-timeline");
    const live = document.getElementById("live-text");
    const conn = document.getElementById("conn");
    let lastSeq = parseInt(page.dataset.afterSeq || "0", 10);
    // the page reads the run, then its events: rows committed in between are rendered
    // too, so resume after the last row the page has, not only after data-after-seq
    timeline.querySelectorAll(".ev[data-seq]").forEach(function (row) {
      lastSeq = Math.max(lastSeq, parseInt(row.dataset.seq, 10) || 0);
    });
    let ticketsDue = false;
    const refreshPanels = debounce(function () {
      refreshInto("run-header", page.dataset.headerUrl);
      refreshInto("run-transcript", page.dataset.transcriptUrl);
      if (ticketsDue) { refreshInto("run-tickets", page.dataset.ticketsUrl); ticketsDue = false; }
      live.textContent = "";
    }, 150);

    // false on a hole: the socket is closed, and the reconnect replays from lastSeq
    function onEvent(frame, html, socket) {
      if (frame.seq <= lastSeq) { return true; }
      if (frame.seq > lastSeq + 1) { socket.close(); return false; }
      lastSeq = frame.seq;
      page.dataset.afterSeq = String(lastSeq);
      const empty = document.getElementById("no-events");
      if (empty) { empty.remove(); }
      timeline.insertAdjacentHTML("beforeend", html);
      timeline.scrollTop = timeline.scrollHeight;
      if (TICKET_EVENTS.has(frame.event_type)) { ticketsDue = true; }
      if (PANEL_EVENTS.has(frame.event_type)) { refreshPanels(); }
      return true;
    }

    keepAlive(
      function () { return "/ws/runs/" + page.dataset.runId + "/?after_seq=" + lastSeq; },
      function (message, socket) {
        if (message.type === "event") { onEvent(message.event, message.html, socket); }
        else if (message.type === "events") {
          for (let i = 0; i < message.events.length; i++) {
            if (!onEvent(message.events[i].event, message.events[i].html, socket)) { break; }
          }
        }
        else if (message.type === "live" && message.event.event_type === "text_delta") {
          live.textContent += message.event.delta;
        }
      },
      function (text, down) { conn.textContent = text; conn.classList.toggle("down", down); }
    );
  }

  function livePage(root) {
    const refreshPanels = throttle(function () {
      root.querySelectorAll("[data-refresh-url]").forEach(function (panel) {
        const checked = Array.from(panel.querySelectorAll("input[type=checkbox]:checked")).map(function (box) { return box.value; });
        window.htmx.ajax("GET", panel.dataset.refreshUrl, { source: panel, target: panel, swap: "innerHTML" }).then(function () {
          checked.forEach(function (value) {
            const box = panel.querySelector("input[type=checkbox][value='" + CSS.escape(value) + "']");
            if (box) { box.checked = true; }
          });
          panel.dispatchEvent(new CustomEvent("awaken:refreshed", { bubbles: true }));
        });
      });
    }, PANEL_REFRESH_MS, PANEL_REFRESH_DELAY_MS, PANEL_REFRESH_JITTER_MS);

    // A tab in the background refetches nothing; it catches up once when shown again.
    let missed = false;
    function refreshAll() {
      if (document.hidden) { missed = true; return; }
      refreshPanels();
    }
    document.addEventListener("visibilitychange", function () {
      if (!document.hidden && missed) { missed = false; refreshPanels(); }
    });

    // Row refreshes are plain fetches applied to the row found when the answer arrives
    // (an htmx outerHTML swap queued behind another would land on the replaced row);
    // only the newest request per run is applied.
    const rowRequests = {};
    function refreshRow(id, url) {
      const n = (rowRequests[id] || 0) + 1;
      rowRequests[id] = n;
      fetch(url, { headers: { "HX-Request": "true" } }).then(function (r) { return r.ok ? r.text() : ""; }).then(function (html) {
        const current = document.getElementById("run-row-" + id);
        if (html && current && rowRequests[id] === n) { current.outerHTML = html; }
      });
    }

    function onRun(summary) {
      const rows = root.querySelector("[data-run-rows]");
      if (rows) {
        const url = rows.dataset.rowUrl.replace("00000000-0000-0000-0000-000000000000", summary.id);
        const existing = document.getElementById("run-row-" + summary.id);
        if (existing) {
          refreshRow(summary.id, url);
        } else if (rows.dataset.prepend === "true") {
          fetch(url, { headers: { "HX-Request": "true" } }).then(function (r) { return r.ok ? r.text() : ""; }).then(function (html) {
            if (html && !document.getElementById("run-row-" + summary.id)) { rows.insertAdjacentHTML("afterbegin", html); }
          });
        }
      }
      refreshAll();
    }

    // The dashboard's figures are pushed, rendered once per server process for all tabs.
    const figures = root.querySelector("[data-figures]");
    function onFigures(html) {
      figures.innerHTML = html;  // the server's template output, escaped there
      figures.dispatchEvent(new CustomEvent("awaken:refreshed", { bubbles: true }));
    }

    const status = root.querySelector(".conn");
    keepAlive(
      function () { return figures ? "/ws/dashboard/?figures=1" : "/ws/dashboard/"; },
      function (message) {
        if (message.type === "run") { onRun(message.run); }
        else if (message.type === "figures" && figures) { onFigures(message.html); }
      },
      function (text, down) { if (status) { status.textContent = text; status.classList.toggle("down", down); } }
    );
  }

  document.addEventListener("click", function (event) {
    const button = event.target.closest("[data-confirm]");
    if (button && !window.confirm(button.dataset.confirm)) { event.preventDefault(); }
    // a decision outcome stays until the operator dismisses it
    const dismiss = event.target.closest("[data-dismiss]");
    const outcome = dismiss ? dismiss.closest(".outcome") : null;
    if (outcome) { outcome.remove(); }
  });

  document.addEventListener("DOMContentLoaded", function () {
    const page = document.getElementById("run-page");
    if (page) { runPage(page); }
    const root = document.querySelector("[data-live]");
    if (root) { livePage(root); }
  });
})();

/* ==== approvals inbox (templates/runs/inbox.html) — keyboard shortcuts =====================
 * Active only when #inbox-list exists and focus is not in a text field:
 *   j / k   move focus between ticket rows (the focused row is marked .selected)
 *   x/space toggle the focused row's checkbox
 *   a / r   approve / reject: the focused row's ticket if nothing is checked (posted to the
 *           bulk endpoint with confirm=1), else open the bulk confirmation (it has the
 *           reason field) for the checked tickets
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
/* ==== end approvals inbox ==================================================================== */
