//! SQLite store (in progress).
