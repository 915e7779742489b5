// The API reference at /docs: Swagger UI over the server's own /openapi.json. "Authorize" takes
// the API key (server.api_keys) for "Try it out" when the server has keys.
"use strict";
window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  persistAuthorization: false,
});
