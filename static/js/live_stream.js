/* Live updates over websockets (loaded by the run page and the list pages only). One
 * module, two uses; the socket and refresh URLs come from the page's data-* attributes,
 * rendered by the server:
 *  - a run page (#run-page, data-socket-url): <socket-url>?after_seq=N replays the
 *    persisted events after N (the page rendered 1..N) then streams live; rows arrive as
 *    server-rendered, escaped HTML, one per `event` frame or several in one `events`
 *    frame when the run is busy; duplicates (seq <= last) are dropped; reconnects with
 *    jittered backoff from the last seq (at once when the browser comes back online);
 *    token deltas are shown with textContent only; the panels refetch from
 *    data-header-url, data-transcript-url and data-tickets-url. A `run` frame (a change
 *    with no event: a ticket claimed, released or assigned) refetches the tickets panel,
 *    unless the operator is editing in it (the next refresh shows the change). The
 *    timeline opens scrolled to its newest event and stays there as events arrive, unless
 *    the operator scrolled up to read: then it keeps still and #timeline-new counts the
 *    new events below (a click scrolls down to them).
 *  - list pages ([data-live][data-socket-url]): the dashboard socket says which run
 *    changed; the page refetches that run's row (the same partial the page rendered, at
 *    data-row-url with data-row-placeholder replaced by the run id) and, at most once per
 *    PANEL_REFRESH_MS, its panels (the inbox list); the dashboard's figures are pushed
 *    by the server (its socket URL asks for them), rendered once per process for every tab.
 *    A thread's page (data-thread-id) also refetches its panels when the socket says the
 *    thread's pending input changed (a `thread` frame: queued, edited, retracted).
 *  - timed panels ([data-refresh-url][data-refresh-seconds], anywhere on the page; the
 *    dashboard's cost, tokens and latency section, read from hourly counters): refetched
 *    every data-refresh-seconds whatever the socket says; a tab in the background
 *    refetches nothing and catches up once when shown again; one whose content carries
 *    data-refresh-final (a finished replay set) stops.
 */
(function () {
  "use strict";

  function backoff(attempt) {
    const ceiling = Math.min(10000, 400 * Math.pow(2, attempt));
    return ceiling / 2 + Math.random() * (ceiling / 2);
  }

  // `path` is relative to the page (usually absolute-path); the socket uses the page's
  // host with ws: for http: and wss: for https:
  function wsUrl(path, query) {
    const url = new URL(path, location.href);
    if (url.protocol === "http:") { url.protocol = "ws:"; }
    else if (url.protocol === "https:") { url.protocol = "wss:"; }
    Object.keys(query || {}).forEach(function (name) { url.searchParams.set(name, query[name]); });
    return url.href;
  }

  const FINAL_CODES = new Set([4401, 4403, 4404]);

  // `url()` is called at each (re)connect: the run page resumes after its last seq
  function keepAlive(url, onMessage, status) {
    let attempt = 0;
    let retry = null;  // the planned reconnect while the socket is down
    function connect() {
      retry = null;
      const socket = new WebSocket(url());
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

  // Keeps a scrolling log at its newest row while the reader is there (within FOLLOW_PX of
  // the bottom); a reader who scrolled up keeps their place, and `hint` (a button, hidden
  // until then) counts the rows added below and scrolls down to them.
  const FOLLOW_PX = 24;
  function followNewest(box, hint) {
    const count = hint ? hint.querySelector("[data-count]") : null;
    let unseen = 0;
    function atBottom() { return box.scrollHeight - box.scrollTop - box.clientHeight <= FOLLOW_PX; }
    function toBottom() { box.scrollTop = box.scrollHeight; }
    function clearHint() {
      unseen = 0;
      if (hint) { hint.hidden = true; }
    }
    box.addEventListener("scroll", function () { if (atBottom()) { clearHint(); } });
    if (hint) { hint.addEventListener("click", function () { toBottom(); clearHint(); }); }
    toBottom();
    return {
      following: atBottom,
      added: function (stick) {
        if (stick) { toBottom(); return; }
        unseen += 1;
        if (count) { count.textContent = String(unseen); }
        if (hint) { hint.hidden = false; }
      },
    };
  }

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
    const follow = followNewest(timeline, document.getElementById("timeline-new"));
    let ticketsDue = false;
    const refreshPanels = debounce(function () {
      refreshInto("run-header", page.dataset.headerUrl);
      refreshInto("run-transcript", page.dataset.transcriptUrl);
      if (ticketsDue) { refreshInto("run-tickets", page.dataset.ticketsUrl); ticketsDue = false; }
      live.textContent = "";
      page.dispatchEvent(new CustomEvent("awaken:run-changed"));  // the trace tab (run_trace.js)
    }, 150);

    const refreshClaims = debounce(function () {
      const panel = document.getElementById("run-tickets");
      const active = document.activeElement;
      const editing = panel && (panel.querySelector("details[open]") ||
        (active && panel.contains(active) && /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName)));
      if (!editing) { refreshInto("run-tickets", page.dataset.ticketsUrl); }
    }, 150);

    // false on a hole: the socket is closed, and the reconnect replays from lastSeq
    function onEvent(frame, html, socket) {
      if (frame.seq <= lastSeq) { return true; }
      if (frame.seq > lastSeq + 1) { socket.close(); return false; }
      lastSeq = frame.seq;
      page.dataset.afterSeq = String(lastSeq);
      const empty = document.getElementById("no-events");
      if (empty) { empty.remove(); }
      const stick = follow.following();
      timeline.insertAdjacentHTML("beforeend", html);
      follow.added(stick);
      if (TICKET_EVENTS.has(frame.event_type)) { ticketsDue = true; }
      if (PANEL_EVENTS.has(frame.event_type)) { refreshPanels(); }
      return true;
    }

    keepAlive(
      function () { return wsUrl(page.dataset.socketUrl, { after_seq: lastSeq }); },
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
        else if (message.type === "run") { refreshClaims(); }
      },
      function (text, down) { conn.textContent = text; conn.classList.toggle("down", down); }
    );
  }

  function livePage(root) {
    const refreshPanels = throttle(function () {
      root.querySelectorAll("[data-refresh-url]:not([data-refresh-seconds])").forEach(function (panel) {
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
      // a page of one thread (data-thread-id) follows only that thread's runs
      if (root.dataset.threadId && summary.thread_id !== root.dataset.threadId) { return; }
      const rows = root.querySelector("[data-run-rows]");
      if (rows) {
        const url = rows.dataset.rowUrl.replace(rows.dataset.rowPlaceholder, summary.id);
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

    // A thread's pending input changed (no run did): its page refetches its panels.
    function onThread(thread) {
      if (root.dataset.threadId && thread.id === root.dataset.threadId) { refreshAll(); }
    }

    // The dashboard's figures are pushed, rendered once per server process for all tabs.
    const figures = root.querySelector("[data-figures]");
    function onFigures(html) {
      figures.innerHTML = html;  // the server's template output, escaped there
      figures.dispatchEvent(new CustomEvent("awaken:refreshed", { bubbles: true }));
    }

    const status = root.querySelector(".conn");
    keepAlive(
      function () { return wsUrl(root.dataset.socketUrl); },
      function (message) {
        if (message.type === "run") { onRun(message.run); }
        else if (message.type === "thread") { onThread(message.thread); }
        else if (message.type === "figures" && figures) { onFigures(message.html); }
      },
      function (text, down) { if (status) { status.textContent = text; status.classList.toggle("down", down); } }
    );
  }

  // A panel refetched on a clock rather than on run changes (hourly figures: a change
  // per run would be a request per run per tab). The next refetch is planned when the
  // last one answered, so a slow server never has two in flight for the same panel.
  function timedPanel(panel) {
    const seconds = parseInt(panel.dataset.refreshSeconds, 10);
    if (!(seconds > 0) || !window.htmx) { return; }
    let timer = null;
    let missed = false;
    function plan() { clearTimeout(timer); timer = setTimeout(tick, seconds * 1000); }
    function refresh() {
      window.htmx.ajax("GET", panel.dataset.refreshUrl, { source: panel, target: panel, swap: "innerHTML" }).then(function () {
        panel.dispatchEvent(new CustomEvent("awaken:refreshed", { bubbles: true }));
      }).catch(function () { /* unreachable server: the next tick tries again */ }).finally(function () {
        // a panel whose content says it will not change again stops refreshing
        if (!panel.querySelector("[data-refresh-final]")) { plan(); }
      });
    }
    function tick() {
      timer = null;
      if (document.hidden) { missed = true; return; }
      refresh();
    }
    document.addEventListener("visibilitychange", function () {
      if (!document.hidden && missed) { missed = false; clearTimeout(timer); refresh(); }
    });
    plan();
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-refresh-url][data-refresh-seconds]").forEach(timedPanel);
    const page = document.getElementById("run-page");
    if (page) { runPage(page); }
    const root = document.querySelector("[data-live][data-socket-url]");
    if (root) { livePage(root); }
  });
})();
