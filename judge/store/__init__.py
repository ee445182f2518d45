"""Storage: the engine and sessions (``engine``), the tables (``tables``) and the reads that
several stages share (``queries``)."""
