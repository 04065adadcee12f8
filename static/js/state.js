// The page's mutable state, in one object the modules share.

import { initialLang, strings } from "./i18n.js";
import { Store } from "./store.js";

export const MODEL_KEY = "edgechat.model";
export const TOKEN_KEY = "edgechat.token";
export const THINK_KEY = "edgechat.think";

export const store = new Store();

const lang = initialLang();

export const state = {
  lang,
  t: strings(lang),
  models: [],
  presets: [], // the operator's, from /api/presets
  limits: null, // null until read, or unreadable
  limitsReady: Promise.resolve(),
  active: null, // {controller, conversation, message}
  pendingRetry: null,
  stick: true, // follows the newest text
  pending: [], // images for the next question
  docs: [], // documents for the next question, described by the server
  encoding: 0, // of them, still being encoded
  attaching: Promise.resolve(),
  problem: null, // why one was not attached: [key of t, arg]
  compareMode: null, // compare.js's {models, blind, send} while compare mode is on
  compare: null, // the comparison on screen (compare.js)
  found: [],
  chosen: -1,
};
