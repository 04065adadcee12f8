// workerd's `scheduler` global (src/workerd/api/basics.h, `Scheduler`): so far
// only `scheduler.wait(delay, {signal})`, a promise that resolves after
// `delay` ms, or rejects with the signal's reason once it is aborted. The
// Worker races it against a read to bound a wait with one await.
if (typeof globalThis.scheduler?.wait !== "function") {
  class Scheduler {
    wait(delay, options = {}) {
      const { signal } = options ?? {};
      if (signal?.aborted) return Promise.reject(signal.reason);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => {
            signal?.removeEventListener("abort", onAbort);
            resolve();
          },
          Math.max(0, Number(delay) || 0),
        );
        function onAbort() {
          clearTimeout(timer);
          reject(signal.reason);
        }
        signal?.addEventListener("abort", onAbort, { once: true });
      });
    }
  }
  globalThis.scheduler = new Scheduler();
}
