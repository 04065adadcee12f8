"""Knowledge bases: each signed-in user's documents, asked in a
conversation with sources. ``store`` (bases and documents in D1, their
originals' keys in R2, the user's limits in the writes), ``chunks`` (a
text cut into overlapping chunks, in estimated tokens), ``ingest`` (a
document converted, chunked, embedded and upserted into Vectorize after
the reply, resumable), ``retrieve`` (the passages nearest a question, in
the prompt with numbers, and the sources the reply carries).

Imports ``media`` (documents' rules and text) and ``core``; never ``apis``,
``history`` or ``feedback`` (its siblings) or ``web``."""
