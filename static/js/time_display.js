/* The header's time switch (runs.models.OperatorPreference): the server writes each
 * <time data-time="style" data-shown="display"> as the viewer chose where it can. This
 * shows the others as the page's display (body[data-time-display]) says: "local" in the
 * browser's own time zone (the server only knows the site's), and rows rendered once for
 * every viewer (a live timeline row) in UTC or relative as chosen. Rows that arrive later
 * (htmx, the live stream) are shown the same way. Lengths of time are left as they are.
 */
(function () {
  "use strict";

  const MOMENTS = ["at", "ago"];
  const CLOCKS = ["clock", "hms"];

  function pad(n, width) { return String(n).padStart(width || 2, "0"); }

  function zoneName(date) {
    try {
      const parts = new Intl.DateTimeFormat(undefined, { timeZoneName: "short" }).formatToParts(date);
      const zone = parts.find(function (p) { return p.type === "timeZoneName"; });
      return zone ? zone.value : "";
    } catch (e) { return ""; }
  }

  function parts(date, utc) {
    return utc
      ? [date.getUTCFullYear(), date.getUTCMonth() + 1, date.getUTCDate(), date.getUTCHours(),
        date.getUTCMinutes(), date.getUTCSeconds(), date.getUTCMilliseconds()]
      : [date.getFullYear(), date.getMonth() + 1, date.getDate(), date.getHours(),
        date.getMinutes(), date.getSeconds(), date.getMilliseconds()];
  }

  function absolute(date, utc) {
    const p = parts(date, utc);
    const text = p[0] + "-" + pad(p[1]) + "-" + pad(p[2]) + " " + pad(p[3]) + ":" + pad(p[4]) + ":" + pad(p[5]);
    return text + " " + (utc ? "UTC" : zoneName(date));
  }

  function clock(date, utc, withMillis) {
    const p = parts(date, utc);
    const text = pad(p[3]) + ":" + pad(p[4]) + ":" + pad(p[5]);
    return withMillis ? text + "." + pad(p[6], 3) : text;
  }

  const UNITS = [["year", 31536000], ["month", 2592000], ["week", 604800], ["day", 86400],
    ["hour", 3600], ["minute", 60]];

  function relative(date) {
    const seconds = (date.getTime() - Date.now()) / 1000;
    const size = Math.abs(seconds);
    for (const [unit, length] of UNITS) {
      if (size >= length) {
        const n = Math.floor(size / length);
        const text = n + " " + unit + (n === 1 ? "" : "s");
        return seconds > 0 ? "in " + text : text + " ago";
      }
    }
    return seconds > 0 ? "in 0 minutes" : "0 minutes ago";
  }

  function show(el, display) {
    const style = el.dataset.time;
    const isMoment = MOMENTS.indexOf(style) !== -1;
    const isClock = CLOCKS.indexOf(style) !== -1;
    if (!isMoment && !isClock) { return; }
    if (display !== "local" && el.dataset.shown === display) { return; }
    if (display === "relative" && isClock) { return; }
    const date = new Date(el.getAttribute("datetime"));
    if (isNaN(date.getTime())) { return; }
    const utc = display === "utc";
    let text;
    if (isClock) { text = clock(date, utc, style === "clock"); }
    else if (display === "relative") { text = relative(date); }
    else { text = absolute(date, utc); }
    el.textContent = text;
    el.dataset.shown = display;
    if (display === "local") { el.dataset.localShown = "true"; }
  }

  function showAll(root) {
    const display = document.body.dataset.timeDisplay || "relative";
    const scope = root && root.querySelectorAll ? root : document;
    if (scope.matches && scope.matches("time[data-time]")) { show(scope, display); }
    scope.querySelectorAll("time[data-time]").forEach(function (el) {
      if (el.dataset.localShown !== "true") { show(el, display); }
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    showAll(document);
    new MutationObserver(function (changes) {
      changes.forEach(function (change) {
        change.addedNodes.forEach(function (node) {
          if (node.nodeType === 1) { showAll(node); }
        });
      });
    }).observe(document.body, { childList: true, subtree: true });
  });
})();
