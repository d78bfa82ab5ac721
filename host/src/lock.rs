//! The checkout lock and the repository lock.
