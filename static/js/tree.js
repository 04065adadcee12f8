// A conversation is a tree of messages, so edits and regenerations keep old
// versions. Every node (the root is the conversation) has `next`, the versions
// of the following message, and `pick`, the one shown. Roles alternate.

function shown(node) {
  const next = node.next;
  if (!Array.isArray(next) || !next.length) return null;
  const pick = Number.isInteger(node.pick) ? node.pick : 0;
  return next[Math.min(Math.max(pick, 0), next.length - 1)];
}

/** The messages on screen, following the picks. */
export function thread(root) {
  const out = [];
  for (let node = shown(root); node; node = shown(node)) out.push(node);
  return out;
}

/** The node whose `next` holds `node` on the shown thread, or null. */
export function parentOf(root, node) {
  let parent = root;
  for (let child = shown(root); child; child = shown(child)) {
    if (child === node) return parent;
    parent = child;
  }
  return null;
}

export function tip(root) {
  let node = root;
  for (let child = shown(root); child; child = shown(child)) node = child;
  return node;
}

export function addVersion(parent, node) {
  if (!Array.isArray(node.next)) node.next = [];
  if (!Number.isInteger(node.pick)) node.pick = 0;
  if (!Array.isArray(parent.next)) parent.next = [];
  parent.next.push(node);
  parent.pick = parent.next.length - 1;
  return node;
}

/**
 * A flat conversation (the server's form: its nodes in order, each naming its
 * parent's index, null for a first message) as the page's tree. Throws a
 * RangeError naming the index of a node whose parent is not an earlier node.
 */
export function fromFlat(flat) {
  const c = { id: flat.id, title: flat.title, updated: flat.updated, pick: flat.pick || 0, next: [] };
  if (flat.preset) c.preset = flat.preset;
  const made = [];
  for (const n of flat.nodes) {
    const { parent, ...fields } = n;
    if (parent !== null && !(Number.isInteger(parent) && parent >= 0 && parent < made.length))
      throw new RangeError(String(made.length));
    const node = { ...fields, pick: n.pick || 0, next: [] };
    (parent === null ? c : made[parent]).next.push(node);
    made.push(node);
  }
  return c;
}

/** Removes a version (a retried failure); shows the newest left. */
export function dropVersion(parent, node) {
  const k = parent.next.indexOf(node);
  if (k < 0) return;
  parent.next.splice(k, 1);
  parent.pick = Math.max(parent.next.length - 1, 0);
}

export function versionOf(root, node) {
  const parent = parentOf(root, node);
  if (!parent) return { index: 0, count: 1 };
  return { index: parent.next.indexOf(node), count: parent.next.length };
}

/** Shows the version `step` (±1) away from `node`; returns it or null. */
export function stepVersion(root, node, step) {
  const parent = parentOf(root, node);
  if (!parent) return null;
  const k = parent.next.indexOf(node) + step;
  if (k < 0 || k >= parent.next.length) return null;
  parent.pick = k;
  return parent.next[k];
}

/** Every node under `root`, depth first, without recursion (trees may be deep). */
export function* nodes(root) {
  const stack = [...(root.next || [])].reverse();
  while (stack.length) {
    const node = stack.pop();
    yield node;
    for (let k = (node.next || []).length - 1; k >= 0; k--) stack.push(node.next[k]);
  }
}

/** Makes the thread go through `target`; false when it is not in the tree. */
export function reveal(root, target) {
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

/** A tree from a plain list of messages (saved before versions existed). */
export function fromList(root, messages) {
  root.next = [];
  root.pick = 0;
  let parent = root;
  for (const m of messages) parent = addVersion(parent, { ...m });
  return root;
}
