-- The images of each user's conversations, kept in the FILES R2 bucket
-- (src/edgechat/files.py): a row per R2 object, so a user's limits are one
-- indexed sum and everything of theirs is found without listing the bucket.
-- `share` is NULL for the user's own image (PUT /api/files/<id>), or the
-- share link whose copy this is (POST /api/shares with "images": true).
CREATE TABLE files (
  key TEXT PRIMARY KEY, -- the R2 key: u/<user, base64url>/f/<id> or .../s/<share>/<id>
  user TEXT NOT NULL,
  id TEXT NOT NULL,
  share TEXT,
  type TEXT NOT NULL,
  width INTEGER NOT NULL,
  height INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  created INTEGER NOT NULL -- server time of the upload (or the copy), ms
) WITHOUT ROWID;

CREATE INDEX files_by_user ON files (user, share, created);
CREATE INDEX files_by_share ON files (share, id);

-- Whether a link shows the conversation's images (its copies in `files`).
ALTER TABLE shares ADD COLUMN images INTEGER NOT NULL DEFAULT 0;
