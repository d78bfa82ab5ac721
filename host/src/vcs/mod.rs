//! The dataset VCS.
