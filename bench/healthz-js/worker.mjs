// The same /healthz route as edgechat's Python Worker, written in JavaScript:
// the baseline the runner benchmark compares the Python Worker against.
export default {
  async fetch(request) {
    const { pathname } = new URL(request.url);
    if (pathname === "/healthz") {
      return Response.json({ status: "ok" }, { headers: { "Cache-Control": "no-store" } });
    }
    return Response.json({ error: { code: "not_found", message: "Not found." } }, { status: 404 });
  },
};
