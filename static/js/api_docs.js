/* The API docs page (templates/drf_spectacular/swagger_ui.html): starts Swagger UI on
 * #swagger-ui with what the server rendered into its data-* attributes:
 *   data-schema-url   the OpenAPI schema to show
 *   data-settings     drf-spectacular's SWAGGER_UI_SETTINGS, as JSON
 *   data-csrf-header / data-csrf-token   sent with "Try it out" requests that change
 *                     something, so that they work with the browser session too
 */
(function () {
  "use strict";

  const root = document.getElementById("swagger-ui");
  if (!root || !window.SwaggerUIBundle) { return; }
  const data = root.dataset;
  const settings = data.settings ? JSON.parse(data.settings) : {};

  function addCsrfToken(request) {
    const safe = !request.method || request.method === "GET";
    if (!safe && request.credentials === "same-origin" && data.csrfHeader && data.csrfToken) {
      request.headers[data.csrfHeader] = data.csrfToken;
    }
    return request;
  }

  window.SwaggerUIBundle(Object.assign({
    url: data.schemaUrl,
    dom_id: "#swagger-ui",
    presets: [window.SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
    validatorUrl: null,  // no badge from a validator on another host
    requestInterceptor: addCsrfToken,
  }, settings));
})();
