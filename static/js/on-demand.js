// Page code that the empty page does not need, fetched on its first use:
// `onDemand("./x.js")` gives handlers that call x.js's exports (the path is
// relative to this folder). A call made while the module is on its way waits
// for it, in order, so a click before it arrived is not lost; once it is
// here, calls are direct (a handler can still call preventDefault). A failed
// fetch is asked again on the next call, under a new URL (`?retry=N`): the
// browser's module map keeps a failed import for the page's life (Chromium
// 150 does: importing the same URL again fails at once without a request),
// so the same URL would never arrive.

export function onDemand(path) {
  let module = null;
  let loading = null;
  let failures = 0;
  const load = () => {
    const url = new URL(path, import.meta.url);
    if (failures) url.searchParams.set("retry", String(failures));
    return import(url.href);
  };
  const ready = () => {
    loading ||= load().then(
      (m) => {
        module = m;
        return m;
      },
      (error) => {
        loading = null;
        failures += 1;
        throw error;
      },
    );
    return loading;
  };
  return {
    ready,
    /** The module if it has arrived, else null. */
    get loaded() {
      return module;
    },
    /** A function calling export `name` with its arguments, now or once the module is here. */
    call:
      (name) =>
      (...args) =>
        module ? module[name](...args) : ready().then((m) => m[name](...args)),
  };
}
