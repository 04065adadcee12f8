// Page code that the empty page does not need, fetched on its first use:
// `onDemand(() => import("./x.js"))` gives handlers that call x.js's exports.
// A call made while the module is on its way waits for it, in order, so a
// click before it arrived is not lost; once it is here, calls are direct
// (a handler can still call preventDefault). A failed fetch is asked again
// on the next call.

export function onDemand(load) {
  let module = null;
  let loading = null;
  const ready = () => {
    loading ||= load().then(
      (m) => {
        module = m;
        return m;
      },
      (error) => {
        loading = null;
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
