-- Knowledge bases: each user's documents, chunked and embedded for
-- retrieval (the DB binding; src/edgechat/knowledge/). Applied like 0001.
-- A document's original bytes are in the FILES bucket (knowledge.store's
-- keys), its vectors in the VECTORS index (ids "<document>:<n>").

-- A base: `id` is 144 random bits (base64url). `shared`: an admin shared it
-- with every user (they may ask it; only its owner changes it).
CREATE TABLE knowledge_bases (
  id TEXT PRIMARY KEY,
  user TEXT NOT NULL,
  name TEXT NOT NULL,
  shared INTEGER NOT NULL DEFAULT 0,
  created INTEGER NOT NULL -- ms
) WITHOUT ROWID;

CREATE INDEX knowledge_bases_by_user ON knowledge_bases (user, created);
CREATE INDEX knowledge_bases_shared ON knowledge_bases (shared, created) WHERE shared = 1;

-- A document of a base and its ingestion: `state` is pending (kept, not yet
-- read), converting, embedding (`embedded` of `chunks` done), ready, or
-- failed (`error` says why; nothing of it is left but this row). `lease`:
-- until when (ms) an ingestion run holds it, so two runs never work on one
-- document; `attempts`: runs since the last progress (a document that keeps
-- failing is given up).
CREATE TABLE knowledge_documents (
  id TEXT PRIMARY KEY,
  base TEXT NOT NULL,
  user TEXT NOT NULL,
  name TEXT NOT NULL,
  type TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  state TEXT NOT NULL,
  chunks INTEGER NOT NULL DEFAULT 0,
  embedded INTEGER NOT NULL DEFAULT 0,
  error TEXT,
  lease INTEGER NOT NULL DEFAULT 0,
  attempts INTEGER NOT NULL DEFAULT 0,
  created INTEGER NOT NULL, -- ms
  updated INTEGER NOT NULL -- ms
) WITHOUT ROWID;

CREATE INDEX knowledge_documents_by_base ON knowledge_documents (base, created);
CREATE INDEX knowledge_documents_by_user ON knowledge_documents (user, state);
-- The hourly run's look for ingestions that stopped (knowledge.store.stalled).
CREATE INDEX knowledge_documents_stalled ON knowledge_documents (updated)
  WHERE state IN ('pending', 'converting', 'embedding');

-- A chunk's text (what retrieval puts in the prompt and a source shows):
-- in D1, since a question reads its few chunks in one indexed query.
CREATE TABLE knowledge_chunks (
  document TEXT NOT NULL,
  n INTEGER NOT NULL,
  user TEXT NOT NULL,
  base TEXT NOT NULL,
  tokens INTEGER NOT NULL,
  text TEXT NOT NULL,
  PRIMARY KEY (document, n)
) WITHOUT ROWID;
