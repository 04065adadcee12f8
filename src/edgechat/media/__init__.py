"""Media: the rules of image and document parts (``images``, ``documents``,
and a document's text through ``toMarkdown``), Markdown read aloud
(``speech``) and recorded speech transcribed (``transcription``).

Imports only ``core``; ``users`` is its sibling and never imported."""
