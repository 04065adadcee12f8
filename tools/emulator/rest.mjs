// A client of the real Workers AI REST API with the binding's contract:
// `new Ai({accountId, apiToken}).run(model, inputs, options)` returns the SSE
// body stream when `inputs.stream` is true, the JSON `result` otherwise, and
// throws `Error("<code>: message")` on failure. The token never appears in an
// error message. Uses only fetch and web streams.

export const DEFAULT_BASE_URL = "https://api.cloudflare.com/client/v4";
export const DEFAULT_GATEWAY_BASE_URL = "https://gateway.ai.cloudflare.com/v1";

// AiOptions.gateway fields -> AI Gateway request headers.
function gatewayHeaders(gateway) {
  const h = {};
  const set = (name, value) => {
    if (value !== undefined && value !== null) h[name] = typeof value === "string" ? value : JSON.stringify(value);
  };
  set("cf-aig-cache-key", gateway.cacheKey);
  set("cf-aig-cache-ttl", gateway.cacheTtl);
  set("cf-aig-skip-cache", gateway.skipCache);
  set("cf-aig-metadata", gateway.metadata);
  set("cf-aig-collect-log", gateway.collectLog);
  set("cf-aig-request-timeout", gateway.requestTimeoutMs);
  if (gateway.retries && typeof gateway.retries === "object") {
    set("cf-aig-max-attempts", gateway.retries.maxAttempts);
    set("cf-aig-retry-delay", gateway.retries.retryDelayMs);
    set("cf-aig-backoff", gateway.retries.backoff);
  }
  return h;
}

function trimSlash(url) {
  return String(url).replace(/\/+$/, "");
}

export class Ai {
  /**
   * @param {{accountId: string, apiToken: string, baseUrl?: string,
   *          gatewayBaseUrl?: string, fetch?: typeof fetch}} config
   */
  constructor({
    accountId,
    apiToken,
    baseUrl = DEFAULT_BASE_URL,
    gatewayBaseUrl = DEFAULT_GATEWAY_BASE_URL,
    fetch: fetchImpl,
  } = {}) {
    if (!accountId) throw new Error("edgechat REST client: accountId is required");
    if (!apiToken) throw new Error("edgechat REST client: apiToken is required");
    this.accountId = accountId;
    this.baseUrl = trimSlash(baseUrl);
    this.gatewayBaseUrl = trimSlash(gatewayBaseUrl);
    this._fetch = fetchImpl ?? ((...args) => fetch(...args));
    // Kept off the enumerable properties so it is not printed with the object.
    Object.defineProperty(this, "_token", { value: String(apiToken), enumerable: false });
  }

  _redact(text) {
    return String(text).split(this._token).join("[redacted]");
  }

  _url(model, gateway) {
    const account = encodeURIComponent(this.accountId);
    if (gateway?.id) {
      return `${this.gatewayBaseUrl}/${account}/${encodeURIComponent(gateway.id)}/workers-ai/${model}`;
    }
    return `${this.baseUrl}/accounts/${account}/ai/run/${model}`;
  }

  async _fail(res) {
    let text = "";
    try {
      text = await res.text();
    } catch {
      // body unreadable: report the status alone
    }
    let data = null;
    try {
      data = JSON.parse(text);
    } catch {
      // not JSON
    }
    const first = Array.isArray(data?.errors) ? data.errors[0] : null;
    if (first && (first.code !== undefined || first.message !== undefined)) {
      const code = first.code ?? res.status;
      throw new Error(this._redact(`${code}: ${first.message ?? "Workers AI error"}`));
    }
    const snippet = text.trim().slice(0, 200);
    throw new Error(
      this._redact(`${res.status}: Workers AI returned HTTP ${res.status}${snippet ? ` ${snippet}` : ""}`),
    );
  }

  /** Same contract as `env.AI.run`; options: {signal, gateway, extraHeaders, returnRawResponse}. */
  async run(model, inputs, options = {}) {
    options = options ?? {};
    const headers = {
      ...(options.extraHeaders ?? {}),
      ...(options.gateway ? gatewayHeaders(options.gateway) : {}),
      "content-type": "application/json",
      authorization: `Bearer ${this._token}`,
    };
    let res;
    try {
      res = await this._fetch(this._url(model, options.gateway), {
        method: "POST",
        headers,
        body: JSON.stringify(inputs ?? {}),
        signal: options.signal,
      });
    } catch (err) {
      if (err?.name === "AbortError" || options.signal?.aborted) throw err;
      throw new Error(this._redact(`edgechat REST client: request to Workers AI failed: ${err?.message ?? err}`));
    }
    if (options.returnRawResponse) return res;
    if (!res.ok) return this._fail(res);

    const type = res.headers.get("content-type") ?? "";
    if (inputs?.stream === true && !type.includes("application/json")) {
      return res.body;
    }
    const text = await res.text();
    let data;
    try {
      data = JSON.parse(text);
    } catch {
      throw new Error(this._redact(`${res.status}: Workers AI returned a body that is not JSON`));
    }
    if (data && data.success === false) {
      const first = Array.isArray(data.errors) ? data.errors[0] : null;
      throw new Error(this._redact(`${first?.code ?? res.status}: ${first?.message ?? "Workers AI error"}`));
    }
    return data && typeof data === "object" && "result" in data ? data.result : data;
  }

  /**
   * Same contract as `env.AI.toMarkdown`, over the REST endpoint
   * (https://developers.cloudflare.com/workers-ai/features/markdown-conversion/usage/rest-api/):
   * the files as multipart `files` fields, the results in `result`.
   */
  async toMarkdown(files) {
    const list = Array.isArray(files) ? files : [files];
    const form = new FormData();
    for (const f of list) form.append("files", f.blob, f.name);
    const url = `${this.baseUrl}/accounts/${encodeURIComponent(this.accountId)}/ai/tomarkdown`;
    let res;
    try {
      res = await this._fetch(url, { method: "POST", headers: { authorization: `Bearer ${this._token}` }, body: form });
    } catch (err) {
      throw new Error(this._redact(`edgechat REST client: request to Workers AI failed: ${err?.message ?? err}`));
    }
    if (!res.ok) return this._fail(res);
    const data = await res.json();
    return Array.isArray(files) ? data.result : data.result?.[0];
  }
}
