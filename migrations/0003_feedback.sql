-- Comparisons, votes and ratings, and the leaderboard's counts (the DB
-- binding; src/edgechat/feedback/). Applied like 0001.

-- A comparison: one question asked of 2 or 3 models (POST /api/comparisons).
-- `id` is 144 random bits (base64url). `blind`: the models are hidden from
-- the client until the vote. `conversation`: the client's, when it said.
CREATE TABLE comparisons (
  id TEXT PRIMARY KEY,
  user TEXT NOT NULL,
  blind INTEGER NOT NULL,
  conversation TEXT,
  created INTEGER NOT NULL -- server time, ms
) WITHOUT ROWID;

CREATE INDEX comparisons_by_user ON comparisons (user, created);

-- One answer of a comparison: `slot` is its place in the order shown
-- (shuffled when blind). `state`: open (not asked yet), answering (a request
-- took it; each slot takes one), done or failed (`error`: the code). What it
-- measured is kept once it ends. `user` is the comparison's, so that the
-- leaderboard's medians read one user's answers by an index.
CREATE TABLE comparison_slots (
  comparison TEXT NOT NULL,
  slot INTEGER NOT NULL,
  user TEXT NOT NULL,
  model TEXT NOT NULL, -- the model's id
  state TEXT NOT NULL,
  request TEXT, -- the request that answers it
  finished INTEGER, -- ms
  ttft_ms REAL,
  tokens_per_s REAL,
  prompt_tokens INTEGER,
  completion_tokens INTEGER,
  cost_usd REAL,
  finish_reason TEXT,
  error TEXT,
  PRIMARY KEY (comparison, slot)
) WITHOUT ROWID;

-- The leaderboard's medians: a model's latest finished answers, everyone's
-- or one user's, read from the index alone (it holds what they measured).
-- (`state` is in them as well: SQLite counts an index as covering only when it
-- holds every column the query names, its own WHERE's included.)
CREATE INDEX slots_done_by_model
  ON comparison_slots (model, state, finished, ttft_ms, tokens_per_s) WHERE state = 'done';
CREATE INDEX slots_done_by_user
  ON comparison_slots (user, model, state, finished, ttft_ms, tokens_per_s) WHERE state = 'done';

-- A user's feedback: a vote on one of their comparisons (`id` is the
-- comparison's, `choice` a slot's number, 'tie' or 'both_bad'), or a rating
-- of one answer (`id` is "<conversation>/<node>", `rating` 'up' or 'down',
-- `tags` a JSON array). `seq` orders the user's writes (every write takes the
-- user's highest + 1), so `?since=<seq>` lists what changed. `day` (UTC) is
-- when it was first given: where the leaderboard counts it.
CREATE TABLE feedback (
  user TEXT NOT NULL,
  id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  kind TEXT NOT NULL, -- 'vote' or 'rating'
  comparison TEXT,
  choice TEXT,
  conversation TEXT,
  node TEXT,
  model TEXT,
  rating TEXT,
  tags TEXT,
  text TEXT,
  day TEXT NOT NULL,
  created INTEGER NOT NULL, -- ms
  updated INTEGER NOT NULL, -- ms
  request TEXT NOT NULL, -- the request that last wrote it
  PRIMARY KEY (user, id)
) WITHOUT ROWID;

CREATE INDEX feedback_by_seq ON feedback (user, seq);

-- The leaderboard's counts per user, UTC day and model, added to in the
-- statements that keep a vote, an answer's outcome or a rating: the board
-- reads these few rows, never the votes themselves. Each count is kept
-- twice, in the user's row and in the account's (user '*', as the budget's
-- spend): an admin's board of everyone reads the account's rows alone.
--
-- Each vote, per model of its finished answers (`blind` apart).
CREATE TABLE board_votes (
  user TEXT NOT NULL,
  day TEXT NOT NULL,
  blind INTEGER NOT NULL,
  model TEXT NOT NULL,
  votes INTEGER NOT NULL,
  wins INTEGER NOT NULL,
  losses INTEGER NOT NULL,
  ties INTEGER NOT NULL,
  both_bad INTEGER NOT NULL,
  PRIMARY KEY (user, day, blind, model)
) WITHOUT ROWID;

-- Each vote, per pair of its finished answers that it orders (a < b by id):
-- what the ratings are fitted to.
CREATE TABLE board_pairs (
  user TEXT NOT NULL,
  day TEXT NOT NULL,
  blind INTEGER NOT NULL,
  a TEXT NOT NULL,
  b TEXT NOT NULL,
  a_wins INTEGER NOT NULL,
  b_wins INTEGER NOT NULL,
  ties INTEGER NOT NULL, -- 'tie' and 'both_bad'
  PRIMARY KEY (user, day, blind, a, b)
) WITHOUT ROWID;

-- Each comparison answer's outcome, and each rating, per model.
CREATE TABLE board_models (
  user TEXT NOT NULL,
  day TEXT NOT NULL,
  model TEXT NOT NULL,
  answers INTEGER NOT NULL, -- finished
  failed INTEGER NOT NULL,
  priced INTEGER NOT NULL, -- finished with a known cost
  cost_usd REAL NOT NULL,
  up INTEGER NOT NULL,
  down INTEGER NOT NULL,
  PRIMARY KEY (user, day, model)
) WITHOUT ROWID;
