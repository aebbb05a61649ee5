"""A run page whose socket dropped while the browser was offline reconnects as soon as
the browser is back online, not after the back-off its failed attempts built up."""

from __future__ import annotations

from django.core.management import call_command
from playwright.sync_api import expect

from tests.browser.helpers import login, start_run
from tests.browser.test_operator_flows import pending_ticket
from tests.factories import user_with_role

# While `__offline`, the page's sockets are stand-ins that fail a moment after they are
# made, as a socket does without a network, and are counted; nothing goes to the network,
# so a loaded machine cannot leave one of them hanging in its handshake. `__liveSocket` is
# the last real socket opened while online, for the test to drop (the site's script
# exposes none).
OFFLINE_SOCKETS = """(() => {
  const Real = window.WebSocket;
  window.__offline = false;
  window.__failed = 0;
  window.__onlineEvents = 0;
  window.__onlineAt = null;
  window.__reconnectAt = null;
  window.addEventListener("online", () => {
    window.__onlineEvents++;
    window.__onlineAt = performance.now();
  });
  window.WebSocket = class extends Real {
    constructor(url, protocols) {
      if (window.__offline) {
        const failing = { readyState: 0, send() {}, close() {} };
        setTimeout(() => {
          failing.readyState = 3;
          window.__failed++;
          if (failing.onclose) { failing.onclose({ code: 1006, reason: "" }); }
        }, 20);
        return failing;
      }
      if (window.__onlineAt !== null && window.__reconnectAt === null) {
        window.__reconnectAt = performance.now();
      }
      super(url, protocols);
      window.__liveSocket = this;
    }
  };
})();"""


def test_the_stream_reconnects_at_once_when_the_browser_is_back_online(new_page):
    call_command("seed_demo", verbosity=0)
    user_with_role("operator", "opa")
    page = new_page()
    page.add_init_script(OFFLINE_SOCKETS)
    login(page, "opa")
    run_id = start_run(page, "approver", "please write a note about lunch")
    pending_ticket(run_id)
    page.goto(f"/runs/{run_id}/")
    conn = page.locator("#conn")
    expect(conn).to_have_text("live")

    # the live socket is closed while the network is still up: closed offline, Chromium
    # may hold its close handshake (and so its onclose) for long; the attempts after it
    # are stand-ins that fail, then the browser goes offline for real
    page.evaluate("window.__offline = true; window.__liveSocket.close()")
    page.context.set_offline(True)
    # four failed attempts: the next one is planned 3.2 to 6.4 s later
    # a function, not an expression: Playwright would eval() an expression, which the
    # page's Content-Security-Policy forbids
    page.wait_for_function("() => window.__failed >= 4", polling=50, timeout=45_000)
    expect(conn).to_have_text("reconnecting…")

    page.evaluate("window.__offline = false")
    page.context.set_offline(False)  # the browser fires `online`
    expect(conn).to_have_text("live", timeout=10_000)
    # timed in the page, so a slow test machine does not count: the socket opened on the
    # `online` event itself, not when the back-off (3.2 s or more) ran out
    delay = page.evaluate("window.__reconnectAt - window.__onlineAt")
    assert 0 <= delay < 1000, delay
    assert page.evaluate("window.__onlineEvents") == 1
    assert page.evaluate("window.__failed") == 4  # no attempt in between: the online one won
    assert page.locator("#run-tickets .ticket").count() == 1
