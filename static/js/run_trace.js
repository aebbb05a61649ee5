/* The run page's tabs and its trace (runs/templates/runs/run_detail.html, loaded by the run
 * page only):
 *  - two tabs: "Transcript and events" (#overview, the default) and "Trace" (#trace);
 *    the URL's hash picks one, so a reload or a shared link opens the same view;
 *  - the trace is fetched (data-trace-url) when its tab is first shown, and again when
 *    the run's events arrive (live_stream.js dispatches `awaken:run-changed` on
 *    #run-page): at once when the tab is shown, else once when it is shown next; a
 *    refresh keeps the spans the reader opened or closed and the steps shown;
 *  - a span's events (its payloads) are fetched when its "events" disclosure opens,
 *    which opening a model call, a tool call or a ticket does;
 *  - a deep link #span-<id> opens the trace, every span around that one and the span
 *    itself, highlights it and scrolls to it (also when the hash changes on the page).
 * Everything shown is the server's escaped HTML; widths are SVG attributes there.
 */
(function () {
  "use strict";

  const REFRESH_MS = 1000;

  function setup(page) {
    const tabs = Array.from(page.querySelectorAll(".tabs [role=tab]"));
    const panel = document.getElementById("run-trace-panel");
    const box = document.getElementById("run-trace");
    if (!panel || !box || tabs.length === 0) { return; }
    let loaded = false;
    let loading = false;
    let stale = false;
    let timer = null;
    let pendingScroll = false;  // a deep link waits for the trace to arrive

    function traceShown() { return !panel.hidden; }

    function select(id, focus) {
      tabs.forEach(function (tab) {
        const on = tab.getAttribute("aria-controls") === id;
        tab.setAttribute("aria-selected", on ? "true" : "false");
        tab.tabIndex = on ? 0 : -1;
        const target = document.getElementById(tab.getAttribute("aria-controls"));
        if (target) { target.hidden = !on; }
        if (on && focus) { tab.focus(); }
      });
      if (id === "run-trace-panel" && (!loaded || stale)) { load(); }
    }

    // the spans whose open state the reader changed from the server's default
    function openStates() {
      const states = {};
      box.querySelectorAll("details.span[id]").forEach(function (span) {
        states[span.id] = span.open;
      });
      return states;
    }

    function load() {
      if (loading || !window.htmx) { stale = true; return; }
      loading = true;
      stale = false;
      const root = document.getElementById("trace-root");
      const steps = root ? root.dataset.steps : "";
      const states = loaded ? openStates() : {};
      const url = panel.dataset.traceUrl + (steps && steps !== "0" ? "?steps=" + encodeURIComponent(steps) : "");
      window.htmx.ajax("GET", url, { source: box, target: box, swap: "innerHTML" }).then(function () {
        Object.keys(states).forEach(function (id) {
          const span = document.getElementById(id);
          if (span && span.tagName === "DETAILS") { span.open = states[id]; }
        });
        loaded = true;
        box.setAttribute("aria-busy", "false");
        reveal(pendingScroll);
        pendingScroll = false;
      }).catch(function () { stale = true; }).finally(function () {
        loading = false;
        if (stale && traceShown()) { later(); }
      });
    }

    function later() {
      if (timer !== null) { return; }
      timer = setTimeout(function () { timer = null; load(); }, REFRESH_MS);
    }

    // the span of the hash: its ancestors and itself opened, highlighted, in view
    function reveal(scroll) {
      const hash = decodeURIComponent(location.hash.slice(1));
      if (hash.indexOf("span-") !== 0) { return; }
      const span = document.getElementById(hash);
      if (!span || !box.contains(span)) { return; }
      box.querySelectorAll(".span-hit").forEach(function (el) { el.classList.remove("span-hit"); });
      for (let el = span.parentElement; el && el !== box; el = el.parentElement) {
        // opened around the span: their own events stay closed (they would push it away)
        if (el.tagName === "DETAILS" && !el.open) { el.dataset.around = "true"; el.open = true; }
      }
      span.open = true;
      span.classList.add("span-hit");
      if (scroll !== false) { span.scrollIntoView({ block: "center" }); }
    }

    function fromHash(initial) {
      const hash = location.hash.slice(1);
      if (hash === "trace" || hash.indexOf("span-") === 0) {
        select("run-trace-panel", false);
        if (loaded) { reveal(true); } else { pendingScroll = true; }
      } else if (hash === "overview") {
        select("run-overview", false);
      } else if (!initial && hash) {
        // another anchor of the page (a ticket): the view that holds it
        const target = document.getElementById(hash);
        if (target && document.getElementById("run-overview").contains(target)) {
          select("run-overview", false);
        }
      }
    }

    tabs.forEach(function (tab, index) {
      tab.addEventListener("click", function (event) {
        event.preventDefault();
        const id = tab.getAttribute("aria-controls");
        history.replaceState(null, "", id === "run-trace-panel" ? "#trace" : "#overview");
        select(id, false);
      });
      tab.addEventListener("keydown", function (event) {
        const step = event.key === "ArrowRight" ? 1 : event.key === "ArrowLeft" ? -1 : 0;
        if (!step) { return; }
        event.preventDefault();
        const next = tabs[(index + step + tabs.length) % tabs.length];
        history.replaceState(null, "", next.getAttribute("aria-controls") === "run-trace-panel" ? "#trace" : "#overview");
        select(next.getAttribute("aria-controls"), true);
      });
    });

    // a span's events are fetched when its "events" disclosure opens; opening a model
    // call, a tool call (but one that started a child run, open from the start) or a
    // ticket opens its events too ("toggle" does not bubble: captured)
    box.addEventListener("toggle", function (event) {
      const el = event.target;
      if (!el.open || !window.htmx) { return; }
      if (el.matches("details.events[data-events-url]") && !el.dataset.loaded) {
        el.dataset.loaded = "true";
        const body = el.querySelector(".events-body");
        window.htmx.ajax("GET", el.dataset.eventsUrl, { source: body, target: body, swap: "innerHTML" })
          .catch(function () { delete el.dataset.loaded; });
      } else if (el.dataset.around) {
        delete el.dataset.around;
      } else if (el.matches("details.span:not(.k-run):not(.k-child):not(.k-activation):not(.k-step)")
        && !el.querySelector(":scope > .span-body > details.span.k-child")) {
        const events = el.querySelector(":scope > .span-body > details.events");
        if (events) { events.open = true; }
      }
    }, true);

    window.addEventListener("hashchange", function () { fromHash(false); });
    page.addEventListener("awaken:run-changed", function () {
      if (!loaded && !loading) { return; }  // fetched fresh when first shown
      stale = true;
      if (traceShown()) { later(); }
    });
    fromHash(true);
  }

  document.addEventListener("DOMContentLoaded", function () {
    const page = document.getElementById("run-page");
    if (page) { setup(page); }
  });
})();
