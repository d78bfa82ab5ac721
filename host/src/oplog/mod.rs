//! The operation journal (`.tether/ops.jsonl`) and the repository indexes.
