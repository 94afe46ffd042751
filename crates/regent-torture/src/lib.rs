//! regent's fault campaign (being moved here from `regent-cli`; see
//! issue 26).
