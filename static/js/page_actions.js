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
