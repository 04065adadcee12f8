// The runner's model of workerd's `scheduler.wait` (tools/runner/scheduler.mjs).
import assert from "node:assert/strict";
import { test } from "node:test";
import "../../tools/runner/scheduler.mjs";

test("scheduler.wait resolves to undefined once its delay has passed", async () => {
  const started = performance.now();
  assert.equal(await scheduler.wait(20), undefined);
  assert.ok(performance.now() - started >= 19, "resolved before its delay");
});

test("scheduler.wait loses a race to a promise that settles first", async () => {
  const controller = new AbortController();
  const timer = scheduler.wait(60_000, { signal: controller.signal });
  const winner = await Promise.race([Promise.resolve("read"), timer]);
  assert.equal(winner, "read");
  controller.abort(); // the timer is cleared, not left to keep the process alive
  await assert.rejects(timer);
});

test("aborting the signal rejects the wait with the signal's reason", async () => {
  const controller = new AbortController();
  const waiting = scheduler.wait(60_000, { signal: controller.signal });
  const reason = new Error("stop");
  controller.abort(reason);
  await assert.rejects(waiting, (err) => err === reason);
});

test("a signal aborted already rejects at once", async () => {
  const reason = new Error("already");
  await assert.rejects(scheduler.wait(60_000, { signal: AbortSignal.abort(reason) }), (err) => err === reason);
});
