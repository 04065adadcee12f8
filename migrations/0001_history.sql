-- Conversations kept per user, and the share links made of them (the DB
-- binding; src/edgechat/history.py and shares.py). Applied with
-- `npx wrangler d1 migrations apply edgechat-history --remote` (at the edge) and by the
-- offline runner on start (tools/runner/bindings.mjs).

-- One row per (user, conversation). `body` is the checked conversation's
-- JSON (conversations.py), NULL for a tombstone: a deleted conversation
-- keeps its row so every device learns of the delete. `version` is the
-- ETag (every write adds one); `seq` orders the user's writes (every write
-- takes the user's highest + 1), so `?since=<seq>` lists what changed.
CREATE TABLE conversations (
  user TEXT NOT NULL,
  id TEXT NOT NULL,
  version INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  changed INTEGER NOT NULL, -- server time of the write, ms
  updated REAL NOT NULL, -- the conversation's own "updated", ms
  title TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  body TEXT,
  PRIMARY KEY (user, id)
) WITHOUT ROWID;

CREATE INDEX conversations_by_seq ON conversations (user, seq);

-- A share link: a copy of the conversation when it was shared (later edits
-- do not reach it). `id` is the link's 128 random bits (base64url). A
-- revoked link keeps its row without the copy, so /s/<id> says it is gone.
CREATE TABLE shares (
  id TEXT PRIMARY KEY,
  user TEXT NOT NULL,
  conversation TEXT NOT NULL,
  title TEXT NOT NULL,
  created INTEGER NOT NULL,
  expires INTEGER NOT NULL,
  body TEXT -- NULL once revoked
);

CREATE INDEX shares_by_user ON shares (user, created);
