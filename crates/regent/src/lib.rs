//! regent
