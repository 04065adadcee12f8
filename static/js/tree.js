// A conversation is a tree of messages, so that editing a message or
// regenerating an answer keeps the earlier versions. Every node (the
// conversation itself is the root) has `next`, its versions of the following
// message, and `pick`, the index of the one shown. The thread on screen, and
// the one sent to the model, follows the picks from the root:
//
//   conversation ─ next: [user "Hi", user "Hello"]  pick 1   (edited: ‹ 2/2 ›)
//                               └ next: [assistant …, assistant …]  pick 0   (regenerated: ‹ 1/2 ›)
//
// User and assistant messages alternate down every branch.

/** The node shown after `node`, or null at the end of the thread. */
function shown(node) {
  const next = node.next;
  if (!Array.isArray(next) || !next.length) return null;
  const pick = Number.isInteger(node.pick) ? node.pick : 0;
  return next[Math.min(Math.max(pick, 0), next.length - 1)];
}

/** The messages on screen: the root's picked child, its picked child, and so on. */
export function thread(root) {
  const out = [];
  for (let node = shown(root); node; node = shown(node)) out.push(node);
  return out;
}

/** The node whose `next` holds `node` on the shown thread (the root for the first message), or null. */
export function parentOf(root, node) {
  let parent = root;
  for (let child = shown(root); child; child = shown(child)) {
    if (child === node) return parent;
    parent = child;
  }
  return null;
}

/** The last message of the shown thread, or the root when there is none. */
export function tip(root) {
  let node = root;
  for (let child = shown(root); child; child = shown(child)) node = child;
  return node;
}

/** Adds `node` as the newest version after `parent` and shows it; returns it. */
export function addVersion(parent, node) {
  if (!Array.isArray(node.next)) node.next = [];
  if (!Number.isInteger(node.pick)) node.pick = 0;
  if (!Array.isArray(parent.next)) parent.next = [];
  parent.next.push(node);
  parent.pick = parent.next.length - 1;
  return node;
}

/** Takes `node` out of `parent`'s versions (a failed answer being retried); shows the newest left. */
export function dropVersion(parent, node) {
  const k = parent.next.indexOf(node);
  if (k < 0) return;
  parent.next.splice(k, 1);
  parent.pick = Math.max(parent.next.length - 1, 0);
}

/** Where `node` stands among its versions: {index (from 0), count}. */
export function versionOf(root, node) {
  const parent = parentOf(root, node);
  if (!parent) return { index: 0, count: 1 };
  return { index: parent.next.indexOf(node), count: parent.next.length };
}

/** Shows the version `step` away from `node` (-1 the one before, +1 the one after); returns it or null. */
export function stepVersion(root, node, step) {
  const parent = parentOf(root, node);
  if (!parent) return null;
  const k = parent.next.indexOf(node) + step;
  if (k < 0 || k >= parent.next.length) return null;
  parent.pick = k;
  return parent.next[k];
}

/** Every node under `root`, depth first (without recursion: a tree may be deep). */
export function* nodes(root) {
  const stack = [...(root.next || [])].reverse();
  while (stack.length) {
    const node = stack.pop();
    yield node;
    for (let k = (node.next || []).length - 1; k >= 0; k--) stack.push(node.next[k]);
  }
}

/** Makes the thread go through `target`, wherever it is in the tree; false when it is not there. */
export function reveal(root, target) {
  // Iterative depth-first search keeping the path of indices.
  const stack = [[root, 0]];
  const path = [];
  while (stack.length) {
    const [node, k] = stack[stack.length - 1];
    if (node === target) {
      for (let d = 0; d < path.length; d++) stack[d][0].pick = path[d];
      return true;
    }
    if (k < (node.next || []).length) {
      stack[stack.length - 1][1] = k + 1;
      path.push(k);
      stack.push([node.next[k], 0]);
    } else {
      stack.pop();
      path.pop();
    }
  }
  return false;
}

/** A tree from a plain list of messages (conversations saved before versions existed). */
export function fromList(root, messages) {
  root.next = [];
  root.pick = 0;
  let parent = root;
  for (const m of messages) parent = addVersion(parent, { ...m });
  return root;
}
