"""What the SQL backends (SQLite, PostgreSQL) share: the filter compiler (``filters``), the change
log of each namespace's chunks and vectors (``changelog``), memory versions (``history``) and the
graph tables (``graph``), written once in the ``?`` placeholder dialect or per dialect where they
must differ."""
