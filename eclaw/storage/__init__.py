"""Where items go: file exporters (JSONL, JSON, CSV), Parquet, and the SQLite store with its runs table."""
