// The per-request ExecutionContext the runtime hands a Worker, and the
// bookkeeping that keeps its waitUntil work alive after the response.
export class ExecutionContext {
  #pending;
  constructor(pending) {
    this.#pending = pending;
    this.props = {};
  }
  waitUntil(promise) {
    this.#pending.add(promise);
  }
  passThroughOnException() {}
}

// Keeps waitUntil work alive past the response and reports its failures,
// as the edge keeps it alive (for up to 30 s) after the response is sent.
export class PendingWork {
  constructor(log) {
    this.log = log;
    this.live = new Set();
  }
  add(value) {
    // A Python awaitable arrives as a borrowed proxy that dies when the call
    // returns; keep our own reference until it settles.
    const keep = typeof value?.copy === "function" && value.type !== undefined ? value.copy() : value;
    const promise = Promise.resolve(keep)
      .catch((err) => this.log(`waitUntil task failed:\n${err?.message ?? err}`))
      .finally(() => {
        this.live.delete(promise);
        if (keep !== value) keep.destroy?.();
      });
    this.live.add(promise);
  }
  async drain() {
    while (this.live.size) await Promise.allSettled([...this.live]);
  }
}
