// workerd's native ("internal", C++-backed) streams, modelled in the runner so
// the Worker's stream code behaves here as it does at the edge. Importing this
// module installs, once per process:
//
//   - globalThis.IdentityTransformStream (Pyodide's `js` module is globalThis);
//   - globalThis.CompressionStream, workerd's native one (its writable takes
//     every write at once: no backpressure; compressed when it closes);
//   - ReadableStreamBYOBReader.prototype.readAtLeast (workerd, non-standard);
//   - ReadableStream.prototype.{getReader, tee, pipeTo, pipeThrough} wrappers
//     that give streams marked native (binding results, IdentityTransformStream
//     halves, their tee branches) workerd's semantics, and pipes with a
//     `signal` or into an IdentityTransformStream workerd's pipe loops. Any
//     other stream keeps Node's standard behaviour untouched.
//
// `systemStream(stream)` turns a binding's streamed result into a native byte
// stream (bindings.mjs does this for `AI`).
//
// Sources (cloudflare/workerd, HEAD 6552d999c79e, 2026-08-22) are cited where
// the model relies on them; tools/runner/README.md ("Streams") lists what is
// modelled and where the model still differs.
//
// Everything here is JavaScript, where workerd's native paths are C++ with no
// JS per chunk. So that the runner does not bill a Worker for them, the
// native-to-native paths skip the Web Streams machinery per chunk: a native
// byte stream is a thin ReadableStream over a "core" (its queue of arrived
// bytes); tee() pulls the source's core once and fans each chunk into the
// branches' queues; a pipe of a binding result (or a tee branch of one) into
// an IdentityTransformStream is one loop handing each chunk from the source's
// core to the destination's IdentityPipe, which a waiting read takes at once.
// bench/streams.mjs measures what is left, against a plain drain.

import { deflateRawSync, deflateSync, gzipSync } from "node:zlib";

const INSTALLED = Symbol.for("edgechat.runner.streams");

// A default (non-BYOB) read of an internal stream allocates this much and
// returns a Uint8Array over it (src/workerd/api/streams/common.h,
// DEFAULT_AUTO_ALLOCATE_CHUNK_SIZE; 16 KiB behind an autogate).
export const AUTO_ALLOCATE_CHUNK_SIZE = 4096;

const SYSTEM = "system"; // a binding result or fetch body, or a tee branch of one
const IDENTITY = "identity"; // an IdentityTransformStream's readable
const TEE_BRANCH = "tee-branch"; // a tee branch of an IdentityTransformStream's readable

// Native readables -> { kind, fail(reason) }. `fail` is what workerd does when
// it "errors" a native source (internal.c++ handlePromise, `sourceRef->error`):
// the stream errors with the reason and its upstream is dropped (cancelled).
const nativeReadables = new WeakMap();
// Native writables -> the sink a native pipe writes into: an
// IdentityTransformStream's IdentityPipe or a CompressionStream's DeflateSink
// (both take `offer`, `abandon` and count `queued` writes).
const nativeWritables = new WeakMap();

const original = {
  getReader: ReadableStream.prototype.getReader,
  tee: ReadableStream.prototype.tee,
  pipeTo: ReadableStream.prototype.pipeTo,
  pipeThrough: ReadableStream.prototype.pipeThrough,
  read: ReadableStreamDefaultReader.prototype.read,
  byobRead: ReadableStreamBYOBReader.prototype.read,
  readerRelease: ReadableStreamDefaultReader.prototype.releaseLock,
  byobRelease: ReadableStreamBYOBReader.prototype.releaseLock,
  readerCancel: ReadableStreamDefaultReader.prototype.cancel,
  getWriter: WritableStream.prototype.getWriter,
  write: WritableStreamDefaultWriter.prototype.write,
  close: WritableStreamDefaultWriter.prototype.close,
  abort: WritableStreamDefaultWriter.prototype.abort,
  writerRelease: WritableStreamDefaultWriter.prototype.releaseLock,
  desiredSize: Object.getOwnPropertyDescriptor(WritableStreamDefaultWriter.prototype, "desiredSize").get,
};

const noop = () => {};
const encoder = new TextEncoder();
const EMPTY = new Uint8Array(0);

// workerd's messages, so the Worker sees the errors it would see at the edge.
const MESSAGES = {
  nonBytes:
    "This TransformStream is being used as a byte stream, but received an object of " +
    "non-ArrayBuffer/ArrayBufferView type on its writable side.",
  onlyByteTypes: "This WritableStream only supports writing byte types.",
  interTransform: "Inter-TransformStream ReadableStream.pipeTo() is not implemented.",
  singleRead: "This ReadableStream only supports a single pending read request at a time.",
  releaseWithRead: "Cannot call releaseLock() on a reader with outstanding read promises.",
  readerLocked: "This ReadableStream is currently locked to a reader.",
  writerLocked: "This WritableStream is currently locked to a writer",
  networkLost: "Network connection lost.",
};

/** The bytes of a chunk as a Uint8Array view (no copy), or null if it is not bytes. */
function viewOf(chunk) {
  if (chunk instanceof Uint8Array) return chunk;
  if (ArrayBuffer.isView(chunk)) return new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  if (chunk instanceof ArrayBuffer) return new Uint8Array(chunk);
  if (typeof SharedArrayBuffer === "function" && chunk instanceof SharedArrayBuffer) return new Uint8Array(chunk);
  return null;
}

/**
 * What an internal writable makes of a chunk (internal.c++,
 * WritableStreamInternalController::write, `processChunk`): any ArrayBuffer,
 * SharedArrayBuffer or ArrayBufferView is copied; a string is UTF-8 encoded
 * (accepted since 2026-05, commit 4b81488e6); undefined and zero-length chunks
 * are no-ops (EMPTY); anything else is refused (null).
 */
function internalChunk(chunk) {
  if (chunk === undefined) return EMPTY;
  if (typeof chunk === "string") return chunk === "" ? EMPTY : encoder.encode(chunk);
  const view = viewOf(chunk);
  if (view === null) return null;
  return view.byteLength === 0 ? EMPTY : view.slice();
}

/**
 * A queue of byte views with O(1) push and shift (an array and a head index;
 * Array.prototype.shift copies, which costs per chunk on a long queue). The
 * views are shared, never handed out: readers copy from them.
 */
class ByteQueue {
  constructor() {
    this.items = [];
    this.head = 0;
    this.count = 0;
  }

  push(view) {
    this.items.push(view);
    this.count++;
  }

  shift() {
    const items = this.items;
    const view = items[this.head];
    this.count--;
    if (this.count === 0) {
      items.length = 0;
      this.head = 0;
    } else {
      items[this.head++] = undefined;
      if (this.head >= 1024 && this.head * 2 >= items.length) {
        this.items = items.slice(this.head);
        this.head = 0;
      }
    }
    return view;
  }

  clear() {
    this.items.length = 0;
    this.head = 0;
    this.count = 0;
  }

  byteLength() {
    let n = 0;
    for (let i = this.head; i < this.items.length; i++) n += this.items[i].byteLength;
    return n;
  }
}

/** Copies queued bytes into `target` from the front of `queue`, as far as they fit. */
function drainInto(target, queue) {
  let filled = 0;
  const room = target.byteLength;
  while (queue.count && filled < room) {
    const head = queue.items[queue.head];
    const n = Math.min(head.byteLength, room - filled);
    if (n === head.byteLength) {
      target.set(head, filled);
      queue.shift();
    } else {
      target.set(head.subarray(0, n), filled);
      queue.items[queue.head] = head.subarray(n);
    }
    filled += n;
  }
  return filled;
}

/** Answers a byte-stream pull with bytes from `queue` (the pending read's view, or a new chunk). */
function respondFrom(controller, queue) {
  const request = controller.byobRequest;
  if (request === null) {
    // Only reachable without a pending read; kept for safety.
    const chunk = new Uint8Array(queue.byteLength());
    drainInto(chunk, queue);
    controller.enqueue(chunk);
    return;
  }
  request.respond(drainInto(request.view, queue));
}

// ---------------------------------------------------------------------------
// Readers of native streams

/**
 * workerd's internal streams serve one read at a time and refuse to release a
 * reader with a read outstanding (internal.c++ ReadableStreamInternalController
 * ::read and ::releaseReader). A BYOB read resolves with a Uint8Array whatever
 * view it was given, and a `min` read cut short by EOF resolves
 * `{done: false, value: <fewer bytes>}`, then `{done: true}` — where the Web
 * Streams standard (and Node) resolves `{done: true, value: <the bytes>}`.
 */
function adaptNativeReader(reader, byob) {
  let pending = 0;
  const settle = (result) => {
    pending--;
    if (!byob || result.value === undefined) return result;
    const value = result.value instanceof Uint8Array ? result.value : viewOf(result.value);
    return { done: result.done && value.byteLength === 0, value };
  };
  const failed = (err) => {
    pending--;
    throw err;
  };
  Object.defineProperties(reader, {
    read: {
      configurable: true,
      writable: true,
      value: function read(view, options) {
        if (pending > 0) return Promise.reject(new TypeError(MESSAGES.singleRead));
        if (byob && options != null && options.min !== undefined && ArrayBuffer.isView(view)) {
          const refused = minRefusal(options.min, view);
          if (refused) return Promise.reject(refused);
        }
        pending++;
        const read = byob ? original.byobRead.call(this, view, options) : original.read.call(this);
        return read.then(settle, failed);
      },
    },
    releaseLock: {
      configurable: true,
      writable: true,
      value: function releaseLock() {
        if (pending > 0) throw new TypeError(MESSAGES.releaseWithRead);
        return (byob ? original.byobRelease : original.readerRelease).call(this);
      },
    },
  });
  return reader;
}

/** workerd's checks of a BYOB minimum (readable.c++ ReaderImpl::read); null if fine. */
function minRefusal(min, view) {
  const byteLength = view.byteLength;
  if (byteLength === 0) {
    return new TypeError('You must call read() on a "byob" reader with a positive-sized TypedArray object.');
  }
  const elements = Math.trunc(Number(min));
  if (!Number.isFinite(elements) || elements === 0) {
    return new TypeError(`Requested invalid minimum number of bytes to read (${min}).`);
  }
  const bytes = elements * (view.BYTES_PER_ELEMENT ?? 1);
  if (elements < 0 || bytes > byteLength) {
    return new TypeError(
      `Minimum bytes to read (${elements < 0 ? min : bytes}) exceeds size of buffer (${byteLength}).`,
    );
  }
  return null;
}

/**
 * `reader.readAtLeast(minElements, view)`: workerd's non-standard BYOB read
 * (readable.c++ ReadableStreamBYOBReader::readAtLeast), the same as
 * `read(view, {min: minElements})`: it resolves once at least that many
 * elements are in the view, with fewer only at EOF, and always detaches the
 * view's buffer (reuse `result.value.buffer`).
 */
function readAtLeast(minElements, view) {
  if (!ArrayBuffer.isView(view)) {
    return Promise.reject(new TypeError("readAtLeast() requires an ArrayBufferView as its second argument."));
  }
  const refused = minRefusal(minElements, view);
  if (refused) return Promise.reject(refused);
  return this.read(view, { min: Math.trunc(Number(minElements)) });
}

function byteStream(source) {
  return new ReadableStream(
    { type: "bytes", autoAllocateChunkSize: AUTO_ALLOCATE_CHUNK_SIZE, ...source },
    { highWaterMark: 0 },
  );
}

// ---------------------------------------------------------------------------
// Native byte sources
//
// Every native readable of kind SYSTEM (a binding result, or a tee branch of
// one) is a thin ReadableStream over a "core": the kj-side source workerd
// pumps without JavaScript. A core has
//   - `queue`: bytes that have arrived and not been taken (a ByteQueue);
//   - `wait()`: a promise that settles once more may have arrived, or the core
//     has ended (it never rejects);
//   - `ended` and `failure` ({reason} or null): nothing more will arrive;
//   - `finish()`: what the stream does once its reader has taken everything
//     after the end (closes or errors it; a no-op where that happened already).
// The stream's own pull reads the core, and so do the runner's native paths
// (tee() and the pipe into an IdentityTransformStream) after locking the
// stream, so those cost no ReadableStream read per chunk.

/**
 * A binding's upstream (a JS ReadableStream). One upstream chunk is read per
 * `wait()`. The stream is closed or errored as soon as the upstream ends, which
 * only happens with nothing queued.
 */
class UpstreamCore {
  constructor(source) {
    this.reader = original.getReader.call(source);
    this.queue = new ByteQueue();
    this.ended = false; // the upstream ended, failed, or the stream was cancelled
    this.failure = null;
    this.controller = null;
    this.after = noop; // run after each read (a Tee takes the chunk there)
    this.onRead = (result) => {
      this.#arrived(result);
      this.after();
    };
    this.onError = (reason) => {
      if (!this.ended) this.#error(reason);
      this.after();
    };
  }

  #arrived(result) {
    if (this.ended) return; // cancelled or failed meanwhile
    if (result.done) {
      this.ended = true;
      this.controller.close();
      this.controller.byobRequest?.respond(0);
      return;
    }
    const view = viewOf(result.value);
    if (view === null) {
      this.#error(new TypeError("a binding's stream produced a chunk that is not bytes"));
      return;
    }
    if (view.byteLength) this.queue.push(view);
  }

  #error(reason) {
    this.ended = true;
    this.failure = { reason };
    this.queue.clear();
    this.controller.error(reason);
  }

  wait() {
    return original.read.call(this.reader).then(this.onRead, this.onError);
  }

  finish() {}

  /** workerd's `sourceRef->error`: errors the stream and drops the upstream. */
  fail(reason) {
    if (this.ended) return;
    this.#error(reason);
    original.readerCancel.call(this.reader, reason).catch(noop);
  }

  cancel(reason) {
    this.ended = true;
    this.queue.clear();
    return original.readerCancel.call(this.reader, reason);
  }
}

/**
 * A binding's streamed result as workerd hands it over: an internal byte
 * stream (ai-api.ts returns the fetch body, `res.body`). One upstream chunk is
 * pulled per read, only when a read is waiting; a chunk larger than the read's
 * view is served over several reads. Cancelling it cancels `source`; an error
 * of `source` errors it with the same reason.
 */
export function systemStream(source) {
  const core = new UpstreamCore(source);
  const stream = byteStream({
    start(c) {
      core.controller = c;
    },
    async pull(c) {
      for (;;) {
        if (core.queue.count) return respondFrom(c, core.queue);
        if (core.ended) return undefined; // the core closed or errored the stream
        await core.wait();
      }
    },
    cancel: (reason) => core.cancel(reason),
  });
  nativeReadables.set(stream, { kind: SYSTEM, core, fail: (reason) => core.fail(reason) });
  return stream;
}

// ---------------------------------------------------------------------------
// tee()

const RESOLVED = Promise.resolve();

/** A core over any native stream, read through its reader (tee() of a non-system stream). */
class ReaderCore {
  constructor(reader) {
    this.reader = reader;
    this.queue = new ByteQueue();
    this.ended = false;
    this.failure = null;
    this.after = noop;
    this.onRead = ({ done, value }) => {
      const view = done ? null : viewOf(value);
      if (done) this.ended = true;
      else if (view === null) {
        this.ended = true;
        this.failure = { reason: new TypeError("tee(): the stream produced a chunk that is not bytes") };
      } else if (view.byteLength) this.queue.push(view);
      this.after();
    };
    this.onError = (reason) => {
      this.ended = true;
      this.failure = { reason };
      this.after();
    };
  }

  wait() {
    return original.read.call(this.reader).then(this.onRead, this.onError);
  }
}

/** One branch of a Tee: its own queue of the shared chunks. */
class BranchCore {
  constructor(tee) {
    this.tee = tee;
    this.queue = new ByteQueue();
    this.gone = false; // ended, cancelled or failed: takes no more chunks
    this.controller = null;
  }

  get ended() {
    return this.tee.ended;
  }

  get failure() {
    return this.tee.failure;
  }

  wait() {
    return this.tee.pull();
  }

  finish() {
    if (this.gone) return;
    this.gone = true;
    const failure = this.tee.failure;
    if (failure) this.controller.error(failure.reason);
    else {
      this.controller.close();
      this.controller.byobRequest?.respond(0);
    }
  }

  fail(reason) {
    if (this.gone) return;
    this.controller.error(reason);
    this.tee.leave(this, reason);
  }
}

/**
 * tee() of a native stream, as workerd's kj tee does it (internal.c++
 * ReadableStreamInternalController::tee; capnproto kj/async-io.c++ AsyncTee):
 * one pull of the source at a time, fanned out into both branches' queues;
 * the source is read only when a branch has a read waiting and nothing
 * buffered; what one branch has not read yet accumulates for it (without
 * limit, as in open-source workerd). The source's end reaches a branch after
 * what it has buffered. Cancelling one branch leaves the other flowing;
 * cancelling both cancels the source.
 */
class Tee {
  constructor(reader, source) {
    this.reader = reader; // holds the tee'd stream's lock
    this.source = source; // its core
    this.branches = [new BranchCore(this), new BranchCore(this)];
    this.reading = null;
    this.ended = false;
    this.failure = null;
    this.onPulled = () => {
      this.reading = null;
      this.#take();
    };
    // A source with an `after` hook hands its chunks over as they arrive,
    // without one more promise per chunk.
    this.hooked = source.after !== undefined;
    if (this.hooked) source.after = this.onPulled;
  }

  #take() {
    const queue = this.source.queue;
    if (queue.count) {
      const [a, b] = this.branches;
      while (queue.count) {
        const view = queue.shift();
        if (!a.gone) a.queue.push(view);
        if (!b.gone) b.queue.push(view);
      }
    } else if (this.source.ended) {
      this.ended = true;
      this.failure = this.source.failure;
    }
  }

  /** Brings in what the source has next (shared by both branches' waits). */
  pull() {
    if (this.reading !== null) return this.reading;
    if (this.ended) return RESOLVED;
    if (this.source.queue.count || this.source.ended) {
      this.#take();
      return RESOLVED;
    }
    const waiting = this.source.wait();
    this.reading = this.hooked ? waiting : waiting.then(this.onPulled);
    return this.reading;
  }

  leave(branch, reason) {
    branch.gone = true;
    branch.queue.clear();
    if (this.branches.every((b) => b.gone)) original.readerCancel.call(this.reader, reason).catch(noop);
  }
}

function nativeTee(source, info) {
  const reader = original.getReader.call(source);
  const tee = new Tee(reader, info.core ?? new ReaderCore(reader));
  const kind = info.kind === SYSTEM ? SYSTEM : TEE_BRANCH;
  return tee.branches.map((core) => {
    const stream = byteStream({
      start(c) {
        core.controller = c;
      },
      async pull(c) {
        for (;;) {
          if (core.queue.count) return respondFrom(c, core.queue);
          if (core.ended) return core.finish();
          await core.wait();
          if (core.gone) return undefined;
        }
      },
      cancel(reason) {
        tee.leave(core, reason);
      },
    });
    // Only a system stream's branches are pumped from their core (pump).
    nativeReadables.set(stream, {
      kind,
      core: kind === SYSTEM ? core : undefined,
      fail: (reason) => core.fail(reason),
    });
    return stream;
  });
}

// ---------------------------------------------------------------------------
// IdentityTransformStream

/**
 * The rendezvous between an IdentityTransformStream's two halves
 * (identity-transform-stream.c++, IdentityTransformStreamImpl): nothing is
 * buffered; a write waits until reads have taken all of its bytes; a read
 * waits for a write (or the close) and takes at most one write's bytes, so a
 * read with a minimum takes from successive writes until it is met. A write
 * that finds a read waiting with room for it all is taken at once and
 * completes synchronously (workerd's writeHelper returns READY_NOW there).
 */
class IdentityPipe {
  constructor() {
    this.state = "open"; // "open" | "closed" | "errored"
    this.error = undefined; // what writes are rejected with once errored
    this.readError = undefined; // what reads are errored with, if not `error`
    this.write = null; // the write waiting for reads: { bytes, offset, resolve, reject, chunk }
    // The readable's controller. A read is waiting while it has a byobRequest:
    // every read of this byte stream (default ones too: autoAllocateChunkSize)
    // is a pull-into, which a pull answers now or leaves for a write or the
    // close to answer (the stream pulls again only after that).
    this.readable = null;
    this.queued = 0; // writes made through a writer that have not settled yet
    this.settled = () => {
      this.queued--;
    };
  }

  /** Answers the readable's pending pull if there is anything to answer it with. */
  #serve(c) {
    const write = this.write;
    if (write !== null) {
      const request = c.byobRequest;
      const rest = write.offset === 0 ? write.bytes : write.bytes.subarray(write.offset);
      const n = request ? Math.min(request.view.byteLength, rest.byteLength) : rest.byteLength;
      write.offset += n;
      if (write.offset === write.bytes.byteLength) {
        // The write settles before the read is delivered, as in readHelper.
        this.write = null;
        write.resolve();
      }
      if (request) {
        request.view.set(n === rest.byteLength ? rest : rest.subarray(0, n));
        request.respond(n);
      } else {
        c.enqueue(rest.slice());
      }
      return true;
    }
    if (this.state === "closed") {
      c.close();
      c.byobRequest?.respond(0);
      return true;
    }
    if (this.state === "errored") {
      c.error(this.readError ?? this.error);
      return true;
    }
    return false;
  }

  #wakeReader() {
    if (this.readable.byobRequest !== null) this.#serve(this.readable);
  }

  // --- writable side

  /**
   * Hands `bytes` (not to be modified afterwards) to the readable side:
   * undefined if a waiting read took them all at once, else a promise that
   * settles once reads have (or the stream fails). `chunk` names the write
   * (see abandon).
   */
  offer(bytes, chunk) {
    if (this.state === "errored") return Promise.reject(this.error);
    if (this.state === "closed") return Promise.reject(new TypeError("This WritableStream has been closed."));
    if (this.write === null) {
      const request = this.readable.byobRequest;
      if (request !== null && request.view.byteLength >= bytes.byteLength) {
        request.view.set(bytes);
        request.respond(bytes.byteLength);
        return undefined;
      }
    }
    return new Promise((resolve, reject) => {
      this.write = { bytes, offset: 0, resolve, reject, chunk };
      this.#wakeReader();
    });
  }

  // The WritableStream's underlying sink.
  sinkWrite(chunk) {
    if (this.state === "errored") return Promise.reject(this.error);
    const bytes = chunk instanceof Uint8Array ? chunk : internalChunk(chunk);
    if (bytes === null) return Promise.reject(new TypeError(MESSAGES.nonBytes));
    if (bytes.byteLength === 0 && this.state === "open") return undefined;
    return this.offer(bytes, chunk);
  }

  sinkClose() {
    if (this.state === "errored") throw this.error;
    this.state = "closed";
    this.#wakeReader();
  }

  // writer.abort(): workerd rejects the write in flight at once, without
  // waiting for a read (compat flag internal_writable_stream_abort_clears_queue,
  // 2024-09-02), and errors the readable side with the reason.
  abort(reason) {
    if (this.state === "errored") return;
    this.state = "errored";
    this.error = reason;
    const write = this.write;
    this.write = null;
    write?.reject(reason);
    try {
      this.readable.error(reason);
    } catch {
      // already closed
    }
    this.#wakeReader();
  }

  // readable.cancel(): a write in flight rejects with the reason, and so does
  // every later write (IdentityTransformStreamImpl::cancel). The writable is
  // not errored proactively (workerd: "TODO(conform)"), only on its next write.
  cancel(reason) {
    if (this.state !== "open") return;
    this.state = "errored";
    this.error = reason;
    const write = this.write;
    this.write = null;
    write?.reject(reason);
    this.#wakeReader();
  }

  /**
   * A pipe into this stream was aborted while it was writing `chunk`. workerd
   * cancels the pending kj write, leaving a write request whose promise is
   * gone: the next read errors with "Network connection lost." and a write
   * hits an internal assertion (identity-transform-stream.c++ readHelper
   * "writer canceled", writeHelper "write operation already in flight").
   */
  abandon(chunk) {
    if (this.write === null || this.write.chunk !== chunk) return;
    const write = this.write;
    this.write = null;
    this.state = "errored";
    this.error = new Error(
      "internal error: write operation already in flight (a pipeTo() into this " +
        "IdentityTransformStream was aborted while its write waited for a read)",
    );
    this.readError = new Error(MESSAGES.networkLost);
    write.reject(this.error);
    this.#wakeReader();
  }

  // --- readable side (the byte stream's underlying source)

  pull(controller) {
    this.#serve(controller);
  }
}

function adaptIdentityWriter(writer, pipe) {
  Object.defineProperty(writer, "write", {
    configurable: true,
    writable: true,
    value: function write(chunk) {
      const bytes = internalChunk(chunk);
      // Refused per write; the stream stays usable (capture_async_api_throws
      // turns workerd's throw into this rejection).
      if (bytes === null) return Promise.reject(new TypeError(MESSAGES.nonBytes));
      if (bytes.byteLength === 0) {
        let healthy = false;
        try {
          healthy = original.desiredSize.call(this) !== null;
        } catch {
          // released: the standard write below rejects
        }
        if (healthy) return Promise.resolve();
      }
      const written = original.write.call(this, bytes);
      // A pipe started after this write waits for it (see pump).
      pipe.queued++;
      written.then(pipe.settled, pipe.settled);
      return written;
    },
  });
  return writer;
}

function queuingStrategy(strategy) {
  if (strategy === undefined || strategy === null) return undefined;
  if (typeof strategy !== "object" && typeof strategy !== "function") {
    throw new TypeError("Failed to construct 'IdentityTransformStream': the queuing strategy must be an object.");
  }
  const { highWaterMark } = strategy;
  if (highWaterMark === undefined) return undefined;
  const hwm = Number(highWaterMark);
  if (!Number.isFinite(hwm) || hwm < 0) {
    throw new TypeError("Failed to construct 'IdentityTransformStream': highWaterMark must be a non-negative number.");
  }
  return hwm;
}

/**
 * workerd's IdentityTransformStream (identity-transform-stream.{h,c++}): an
 * identity byte pipe whose write resolves once reads have taken its bytes.
 * Writes may be queued without awaiting (each settles in turn); closing the
 * writable ends the readable; aborting it errors the readable; cancelling the
 * readable rejects the pending and every later write. The readable is a byte
 * stream (BYOB reads, `min`, `readAtLeast`). `{highWaterMark}` (bytes) only
 * drives `writer.desiredSize`/`ready`; without it `desiredSize` stays 1.
 */
export class IdentityTransformStream {
  #readable;
  #writable;

  constructor(strategy = undefined) {
    const hwm = queuingStrategy(strategy);
    const pipe = new IdentityPipe();
    this.#readable = byteStream({
      start(c) {
        pipe.readable = c;
      },
      pull: (c) => pipe.pull(c),
      cancel: (reason) => pipe.cancel(reason),
    });
    this.#writable = new WritableStream(
      {
        start(c) {
          // Fires as writer.abort() is called, while a write may be in flight.
          c.signal.addEventListener("abort", () => pipe.abort(c.signal.reason), { once: true });
        },
        write: (chunk) => pipe.sinkWrite(chunk),
        close: () => pipe.sinkClose(),
        abort: (reason) => pipe.abort(reason),
      },
      hwm === undefined
        ? { highWaterMark: 1, size: () => 0 }
        : { highWaterMark: hwm, size: (chunk) => viewOf(chunk)?.byteLength ?? 0 },
    );
    Object.defineProperty(this.#writable, "getWriter", {
      configurable: true,
      writable: true,
      value: function getWriter() {
        return adaptIdentityWriter(original.getWriter.call(this), pipe);
      },
    });
    nativeReadables.set(this.#readable, {
      kind: IDENTITY,
      fail(reason) {
        try {
          pipe.readable.error(reason);
        } catch {
          // already closed
        }
        pipe.cancel(reason);
      },
    });
    nativeWritables.set(this.#writable, pipe);
  }

  get readable() {
    return this.#readable;
  }

  get writable() {
    return this.#writable;
  }
}
/** Makes `Class` a TransformStream subclass named `name`, as workerd's native transforms are. */
function asTransformStream(Class, name) {
  Object.setPrototypeOf(Class.prototype, TransformStream.prototype);
  Object.setPrototypeOf(Class, TransformStream);
  Object.defineProperty(Class.prototype, Symbol.toStringTag, { value: name, configurable: true });
}
// In workerd it is a TransformStream subclass (identity-transform-stream.h).
asTransformStream(IdentityTransformStream, "IdentityTransformStream");

const DEFLATERS = { gzip: gzipSync, deflate: deflateSync, "deflate-raw": deflateRawSync };

/**
 * The sink of workerd's CompressionStream (compression.c++,
 * CompressionStreamImpl): each write is taken at once, whatever the readable
 * side does. There is no backpressure ("TODO(later): This does not yet
 * implement any backpressure. A caller can keep calling write without
 * reading, which will continue to fill the internal buffer."), so a native
 * pipe into it pulls its source as fast as it sends, with no JavaScript per
 * chunk in workerd. workerd compresses each write in C++; Node's zlib
 * streams cost JavaScript and a thread-pool task per write, which would
 * bill the Worker here for what is native there. So the runner keeps what
 * is written and compresses it in one synchronous zlib call when the
 * writable closes (the same zlib work, one call): the readable's bytes come
 * then, not as they are made.
 */
class DeflateSink {
  constructor(format) {
    this.deflate = DEFLATERS[format];
    this.input = [];
    this.output = new ByteQueue();
    this.readable = null; // the readable's controller
    this.ended = false;
    this.error = undefined;
    this.queued = 0; // writes before a pipe: none wait here
  }

  #serve() {
    const c = this.readable;
    if (c === null || c.byobRequest === null || this.error !== undefined) return;
    if (this.output.count > 0) respondFrom(c, this.output);
    else if (this.ended) {
      c.close();
      c.byobRequest?.respond(0);
    }
  }

  /** Taken at once, whatever the readable side does (undefined: nothing to wait for). */
  offer(bytes) {
    if (this.error !== undefined) return Promise.reject(this.error);
    if (this.ended) return Promise.reject(new TypeError("This WritableStream has been closed."));
    this.input.push(bytes);
    return undefined;
  }

  sinkWrite(chunk) {
    const bytes = internalChunk(chunk);
    if (bytes === null) return Promise.reject(new TypeError(MESSAGES.onlyByteTypes));
    return bytes.byteLength === 0 ? undefined : this.offer(bytes);
  }

  sinkClose() {
    if (this.error !== undefined) throw this.error;
    const compressed = this.deflate(Buffer.concat(this.input));
    this.input = [];
    this.output.push(new Uint8Array(compressed.buffer, compressed.byteOffset, compressed.byteLength));
    this.ended = true;
    this.#serve();
  }

  abort(reason) {
    if (this.error !== undefined) return;
    this.error = reason;
    this.input = [];
    this.output.clear();
    try {
      this.readable?.error(reason);
    } catch {
      // already closed
    }
  }

  abandon() {} // a write here never waits, so none is ever cut off

  pull() {
    this.#serve();
  }
}

/**
 * workerd's CompressionStream ("gzip", "deflate", "deflate-raw"): a native
 * writable that never pushes back, a native byte-stream readable of what
 * came out. A native source piped into the writable is pumped with no
 * JavaScript per chunk (`pump`); any other writer goes through its writable.
 */
export class CompressionStream {
  #readable;
  #writable;

  constructor(format) {
    if (!Object.hasOwn(DEFLATERS, format)) {
      throw new TypeError(`The compression format must be either 'deflate', 'deflate-raw' or 'gzip'.`);
    }
    const sink = new DeflateSink(format);
    this.#readable = byteStream({
      start(c) {
        sink.readable = c;
      },
      pull: (c) => sink.pull(c),
      cancel: (reason) => sink.abort(reason),
    });
    this.#writable = new WritableStream(
      {
        write: (chunk) => sink.sinkWrite(chunk),
        close: () => sink.sinkClose(),
        abort: (reason) => sink.abort(reason),
      },
      { highWaterMark: 1, size: () => 0 },
    );
    nativeReadables.set(this.#readable, { kind: IDENTITY, fail: (reason) => sink.abort(reason) });
    nativeWritables.set(this.#writable, sink);
  }

  get readable() {
    return this.#readable;
  }

  get writable() {
    return this.#writable;
  }
}
asTransformStream(CompressionStream, "CompressionStream");

// ---------------------------------------------------------------------------
// pipeTo / pipeThrough

function pipeOptions(options) {
  const o = options ?? {};
  const signal = o.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new TypeError('The "options.signal" property must be an instance of AbortSignal.');
  }
  return {
    preventClose: Boolean(o.preventClose),
    preventAbort: Boolean(o.preventAbort),
    preventCancel: Boolean(o.preventCancel),
    signal,
  };
}

function lockBoth(source, dest) {
  return { reader: original.getReader.call(source), writer: original.getWriter.call(dest) };
}

/**
 * Native source into a native writable (an IdentityTransformStream's or a
 * CompressionStream's): workerd's kj pump (internal.c++
 * writeLoopAfterFrontOutputLock, Pipe case, `tryPumpTo`). Both streams are
 * locked for the pipe, but no chunk goes through their JavaScript machinery:
 * the loop takes each chunk from the source's core and offers it straight to
 * the destination's sink, and waits only when the source has nothing yet or
 * the sink has not taken the chunk (an IdentityPipe with no read waiting).
 * - The signal cancels the pump at once: the pipe rejects with its reason,
 *   the source is errored (dropped) even with preventCancel, the destination
 *   is aborted unless preventAbort, and a chunk read but not yet taken by the
 *   destination's reader is lost — if a write was waiting, the destination is
 *   left broken (see IdentityPipe.abandon).
 * - A failed write (the destination's readable was cancelled) also errors
 *   the source, whatever preventCancel says ("TODO(conform)" there).
 * - The pipe settles as soon as the source ends (and the destination is
 *   closed, unless preventClose).
 */
function pump(source, src, dest, pipe, opts) {
  const { reader, writer } = lockBoth(source, dest);
  const core = src.core;
  return new Promise((resolve, reject) => {
    let stopped = false;
    let writing = null;
    const release = () => {
      original.readerRelease.call(reader);
      original.writerRelease.call(writer);
    };
    const stop = (reason, cause) => {
      if (stopped) return;
      stopped = true;
      opts.signal?.removeEventListener("abort", onAbort);
      reject(reason);
      if (cause !== "read") src.fail(reason);
      if (!opts.preventAbort) original.abort.call(writer, reason).catch(noop);
      else if (writing !== null && cause === "signal") pipe.abandon(writing);
      release();
    };
    const onAbort = () => stop(opts.signal.reason, "signal");
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    (async () => {
      if (pipe.queued > 0) {
        // Writes queued before the pipe go first (the Pipe event runs after
        // them): an empty write settles once they have.
        try {
          await original.write.call(writer, EMPTY);
        } catch (err) {
          return stop(err, "write");
        }
        if (stopped) return;
      }
      const queue = core.queue;
      for (;;) {
        if (queue.count === 0) {
          if (core.ended) {
            core.finish();
            if (core.failure) return stop(core.failure.reason, "read");
            break;
          }
          await core.wait();
          if (stopped) return;
          continue;
        }
        const chunk = queue.shift();
        const written = pipe.offer(chunk, chunk);
        if (written === undefined) continue; // a waiting read took it all
        writing = chunk;
        try {
          await written;
        } catch (err) {
          return stop(err, "write");
        }
        writing = null;
        if (stopped) return;
      }
      if (!opts.preventClose) {
        try {
          await original.close.call(writer);
        } catch (err) {
          return stop(err, "write");
        }
      }
      if (stopped) return;
      stopped = true;
      opts.signal?.removeEventListener("abort", onAbort);
      release();
      resolve();
    })();
  });
}

/**
 * The promise-driven pipe loops: any source into a JavaScript-backed
 * destination (standard.c++ WritableStreamJsController::pipeLoop), or a
 * JavaScript-backed source into an IdentityTransformStream (internal.c++
 * WritableStreamInternalController::Pipe::pipeLoop). The signal is checked
 * only at each step, never listened to: an abort while a read is pending
 * takes effect when that read resolves, and **its chunk is dropped**; then
 * the source is cancelled unless preventCancel (else released) and the
 * destination aborted unless preventAbort (else released).
 */
function loop(source, dest, pipe, opts) {
  const { reader, writer } = lockBoth(source, dest);
  return new Promise((resolve, reject) => {
    let finished = false;
    const end = (err, { cancelSource = false, abortDest = false } = {}) => {
      finished = true;
      const done = async () => {
        if (cancelSource) await original.readerCancel.call(reader, err).catch(noop);
        original.readerRelease.call(reader);
        if (abortDest) await original.abort.call(writer, err).catch(noop);
        original.writerRelease.call(writer);
      };
      return done().then(() => reject(err));
    };
    const checkSignal = () => {
      if (!opts.signal?.aborted) return null;
      return end(opts.signal.reason, { cancelSource: !opts.preventCancel, abortDest: !opts.preventAbort });
    };
    if (pipe === null) {
      // A JS destination that errors releases the source at once (standard.c++
      // WritableStreamJsController::doError, PipeLocked).
      writer.closed.catch((err) => {
        if (!finished) end(err, { cancelSource: !opts.preventCancel });
      });
    }
    (async () => {
      for (;;) {
        if (checkSignal()) return;
        let result;
        try {
          result = await original.read.call(reader);
        } catch (err) {
          if (!finished) end(err, { abortDest: !opts.preventAbort });
          return;
        }
        if (finished) return;
        if (checkSignal()) return; // the chunk just read is dropped
        if (result.done) {
          finished = true;
          original.readerRelease.call(reader);
          try {
            if (!opts.preventClose) await original.close.call(writer);
          } catch (err) {
            original.writerRelease.call(writer);
            return reject(err);
          }
          original.writerRelease.call(writer);
          return resolve();
        }
        let chunk = result.value;
        if (pipe !== null) {
          chunk = internalChunk(chunk);
          if (chunk === null) {
            const err = new TypeError(MESSAGES.onlyByteTypes);
            await original.abort.call(writer, err).catch(noop);
            if (!finished) end(err, { cancelSource: !opts.preventCancel });
            return;
          }
          if (chunk.byteLength === 0) continue;
        }
        try {
          await original.write.call(writer, chunk);
        } catch (err) {
          if (!finished) end(err, { cancelSource: !opts.preventCancel });
          return;
        }
        if (finished) return;
      }
    })();
  });
}

function workerdPipeTo(source, dest, options) {
  if (!(source instanceof ReadableStream)) {
    return Promise.reject(new TypeError("pipeTo() must be called on a ReadableStream"));
  }
  if (!(dest instanceof WritableStream)) {
    return Promise.reject(new TypeError("The destination of pipeTo() must be a WritableStream"));
  }
  let opts;
  try {
    opts = pipeOptions(options);
  } catch (err) {
    return Promise.reject(err);
  }
  if (source.locked) return Promise.reject(new TypeError(MESSAGES.readerLocked));
  if (dest.locked) return Promise.reject(new TypeError(MESSAGES.writerLocked));
  const pipe = nativeWritables.get(dest) ?? null;
  const src = nativeReadables.get(source);
  if (pipe !== null) {
    // An aborted signal rejects before any lock is taken, with nothing
    // cancelled or aborted (internal.c++ tryPipeFrom).
    if (opts.signal?.aborted) return Promise.reject(opts.signal.reason);
    if (src !== undefined && src.kind !== SYSTEM) {
      // identity-transform-stream.c++ pumpTo / internal.c++ TeeBranch pumpTo:
      // both locks are taken, then the pipe rejects (and they stay held).
      lockBoth(source, dest);
      return Promise.reject(new TypeError(MESSAGES.interTransform));
    }
    if (src !== undefined) return pump(source, src, dest, pipe, opts);
  }
  return loop(source, dest, pipe, opts);
}

function pipeTo(dest, options) {
  // Streams workerd would not treat differently keep Node's standard pipe.
  const involved =
    nativeReadables.has(this) || nativeWritables.has(dest) || (options != null && options.signal !== undefined);
  if (!involved) return original.pipeTo.call(this, dest, options);
  return workerdPipeTo(this, dest, options);
}

function pipeThrough(transform, options) {
  const dest = transform?.writable;
  const involved =
    nativeReadables.has(this) || nativeWritables.has(dest) || (options != null && options.signal !== undefined);
  if (!involved) return original.pipeThrough.call(this, transform, options);
  if (!(transform?.readable instanceof ReadableStream) || !(dest instanceof WritableStream)) {
    throw new TypeError("pipeThrough() needs a {readable, writable} pair");
  }
  if (this.locked) throw new TypeError(MESSAGES.readerLocked);
  if (dest.locked) throw new TypeError(`${MESSAGES.writerLocked}.`);
  const src = nativeReadables.get(this);
  if (nativeWritables.has(dest) && src !== undefined && src.kind !== SYSTEM) {
    throw new TypeError(MESSAGES.interTransform); // synchronously, as pipeThrough() does in workerd
  }
  workerdPipeTo(this, dest, options).catch(noop);
  return transform.readable;
}

function getReader(options) {
  const reader = original.getReader.call(this, options);
  if (!nativeReadables.has(this)) return reader;
  return adaptNativeReader(reader, reader instanceof ReadableStreamBYOBReader);
}

function tee() {
  const info = nativeReadables.get(this);
  if (info === undefined) return original.tee.call(this);
  if (this.locked) throw new TypeError("This ReadableStream is currently locked to a reader,");
  return nativeTee(this, info);
}

/** Whether the runner treats `stream` as one of workerd's native streams. */
export function isNativeStream(stream) {
  return nativeReadables.has(stream) || nativeWritables.has(stream);
}

// workerd's Request constructor (http.c++, Request::tryParseRedirect) takes
// only these; Node's also takes "error".
const REDIRECT_MODES = new Set(["follow", "manual"]);
const REDIRECT_REFUSED =
  'Invalid redirect value, must be one of "follow" or "manual" ("error" won\'t be implemented ' +
  'since it does not make sense at the edge; use "manual" and check the response status code).';

/**
 * `fetch` whose response bodies are native byte streams, as workerd's are
 * (an HTTP body is kj's): BYOB reads, tee() and pipes behave as for a
 * binding's result. Node's own bodies are JavaScript streams. Redirects as
 * in workerd (http.c++ handleHttpResponse): "follow" (the default) follows
 * a 3xx with a Location, "manual" returns the 3xx itself (its status, its
 * Location, its body), and any other mode is refused before a request is made.
 */
function nativeFetch(nodeFetch) {
  return async function fetch(input, init) {
    const redirect = init?.redirect ?? (input instanceof Request ? input.redirect : undefined);
    if (redirect !== undefined && !REDIRECT_MODES.has(String(redirect))) throw new TypeError(REDIRECT_REFUSED);
    const response = await nodeFetch(input, init);
    if (response.body === null) return response;
    const { status, statusText, headers } = response;
    return new Response(systemStream(response.body), { status, statusText, headers });
  };
}

function install() {
  if (globalThis[INSTALLED]) return;
  Object.defineProperty(globalThis, INSTALLED, { value: true });
  const methods = (target, entries) => {
    for (const [name, value] of Object.entries(entries)) {
      Object.defineProperty(target, name, { value, writable: true, configurable: true, enumerable: false });
    }
  };
  methods(globalThis, { IdentityTransformStream, CompressionStream, fetch: nativeFetch(globalThis.fetch) });
  if (typeof ReadableStreamBYOBReader.prototype.readAtLeast !== "function") {
    methods(ReadableStreamBYOBReader.prototype, { readAtLeast });
  }
  methods(ReadableStream.prototype, { getReader, tee, pipeTo, pipeThrough });
}

install();
