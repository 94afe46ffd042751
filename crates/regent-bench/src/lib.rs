//! regent's benchmark harness (being moved here from `regent-cli`; see
//! issue 26).
