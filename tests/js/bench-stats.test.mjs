// The benchmarks' ratio of means and its bootstrap interval (bench/lib.mjs).
import assert from "node:assert/strict";
import { test } from "node:test";
import { ratioOfMeans } from "../../bench/lib.mjs";

const close = (actual, expected) => assert.ok(Math.abs(actual - expected) < 1e-9, `${actual} ≠ ${expected}`);

test("a case that costs the same as the base in every round is 1.00× with no spread", () => {
  const rounds = [[300, 280, 350, 310]];
  const { ratio, low, high } = ratioOfMeans(rounds, rounds);
  close(ratio, 1);
  close(low, 1);
  close(high, 1);
});

test("a constant ratio survives any resampling of the rounds", () => {
  const base = [[200, 250, 300, 400, 350]];
  const { ratio, low, high } = ratioOfMeans([base[0].map((v) => v * 1.25)], base);
  close(ratio, 1.25);
  close(low, 1.25);
  close(high, 1.25);
});

test("the ratio is of the means, not the mean of the rounds' ratios", () => {
  // Rounds' ratios 4/3 and 1 (their mean 1.17); the means, 250 / 200 = 1.25:
  // the dear round weighs more, as it does on the bill.
  close(ratioOfMeans([[400, 100]], [[300, 100]]).ratio, 1.25);
});

test("noisy rounds give an interval around the estimate, the same from run to run", () => {
  const base = [[300, 310, 290, 305, 295, 300, 310, 290]];
  const cost = [[390, 330, 360, 400, 340, 370, 350, 380]];
  const once = ratioOfMeans(cost, base);
  assert.ok(once.low < once.ratio && once.ratio < once.high, JSON.stringify(once));
  assert.ok(once.low > 1.1 && once.high < 1.3, JSON.stringify(once));
  assert.deepEqual(ratioOfMeans(cost, base), once);
});

test("runners of the same code that disagree widen the interval to both", () => {
  const base = [[100, 100, 100, 100, 100, 100]];
  const cost = [
    [120, 120, 120, 120, 120, 120],
    [140, 140, 140, 140, 140, 140],
  ];
  const { ratio, low, high } = ratioOfMeans(cost, base);
  close(ratio, 1.3);
  close(low, 1.2);
  close(high, 1.4);
});

test("rounds that do not line up are refused", () => {
  assert.throws(() => ratioOfMeans([[1, 2, 3]], [[1, 2]]), /same rounds/);
  assert.throws(() => ratioOfMeans([[]], [[]]), /same rounds/);
});
